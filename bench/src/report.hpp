// Turns the TSV results of a run into bench/results/latest.md, every figure
// of the run in tables. The targets, their verdicts and the plots are
// bench/render.py's (the targets live in docs/performance.md).
#pragma once

#include <string>

namespace bench {

struct report_paths {
    std::string in;       // TSV written by "dlock_bench run ... --out"
    std::string machine;  // markdown describing the machine, included verbatim
    std::string md;       // the results file to write
};

// Returns a process exit status.
int write_report(const report_paths& paths);

} // namespace bench
