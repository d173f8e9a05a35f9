// Turns the TSV results of a run into bench/results/latest.md and a gnuplot
// script that draws the plots.
#pragma once

#include <string>

namespace bench {

struct report_paths {
    std::string in;       // TSV written by "dlock_bench run ... --out"
    std::string machine;  // markdown describing the machine, included verbatim
    std::string md;       // the results file to write
    std::string gnuplot;  // the gnuplot script to write
    std::string plot_dir; // where the script puts its PNGs: the directory of md
    std::string summary;  // optional: the key figures and the targets, for the README
};

// Returns a process exit status.
int write_report(const report_paths& paths);

} // namespace bench
