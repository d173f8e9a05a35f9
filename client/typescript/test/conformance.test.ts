// The conformance scenarios (client/conformance) with the TypeScript client,
// and their negative controls, each of which this runner must fail.
import assert from "node:assert/strict";
import { basename } from "node:path";
import { before, describe, test } from "node:test";

import { capabilities, environment, load, runScenario, scenarioFiles, setup, skips } from "./conformance.js";

const env = environment();
let caps: Set<string>;

before(async () => {
  await setup(env);
  caps = await capabilities(env);
});

describe("conformance scenarios", () => {
  for (const path of scenarioFiles("scenarios")) {
    test(basename(path, ".json"), async (t) => {
      const result = await runScenario(load(path), env, caps, skips());
      if (result.status === "skipped") {
        t.skip(result.detail);
        return;
      }
      assert.equal(result.status, "passed", result.detail);
    });
  }
});

describe("negative controls are caught", () => {
  for (const path of scenarioFiles("negative")) {
    test(basename(path, ".json"), async (t) => {
      const scenario = load(path);
      const result = await runScenario(scenario, env, caps);
      if (result.status === "skipped") {
        t.skip(result.detail);
        return;
      }
      assert.equal(result.status, "failed", "the runner passed a scenario with a wrong expectation");
      // Caught for the planted reason, not for a fault of the runner's own.
      assert.ok(result.detail.startsWith(`step ${(scenario as { fails_at_step?: number }).fails_at_step} `), result.detail);
      t.diagnostic(`caught as expected: ${result.detail}`);
    });
  }
});
