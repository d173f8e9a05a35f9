#!/usr/bin/env python3
"""Renders a benchmark run: the key figures, the targets with their verdicts, the
floors, and the plots.

  bench/render.py [--tsv bench/results/latest.tsv] [--doc docs/performance.md]
                  [--out-dir bench/results] [--update-doc] [--no-plots]

The run is the TSV the driver writes (case, system, clients or rows, metric,
value). The targets and the floors are not in this script: they are the tables
of docs/performance.md that follow the lines "<!-- targets -->" and
"<!-- floors -->". A measure there is a TSV cell written case/system/x/metric,
or a quotient of two sums of cells ("a / b + c"); a goal is "≥ N" or "≤ N" in
the measure's unit (× for a quotient, % for a share, µs, pairs). A floor names
its target by the target's exact name and is judged by that target's goal, so
that a goal is written once.

Writes OUT_DIR/summary.md (the key figures, the farm's figures when the run
has them, the targets with their verdicts and their floors' verdicts, and the
floors) and, with gnuplot, the PNG plots
(uncontended-throughput, uncontended-latency, contended, scale-latency,
scale-size). --update-doc also replaces the text between "<!-- rendered:
begin -->" and "<!-- rendered: end -->" in the doc with summary.md.
Benchmarks measure: a missed target never makes this script fail.
"""
import argparse
import math
import os
import re
import subprocess
import sys
from collections import OrderedDict

REFERENCE = 'dlock-sql'


def load(path):
    data = {}
    order = OrderedDict()  # case -> systems in first-seen order
    for line in open(path, encoding='utf-8'):
        parts = line.rstrip('\n').split('\t')
        if len(parts) != 5:
            continue
        case, system, x, metric, value = parts
        if metric == 'note':
            continue
        try:
            data[(case, system, int(float(x)), metric)] = float(value)
        except ValueError:
            continue
        order.setdefault(case, [])
        if system not in order[case]:
            order[case].append(system)
    return data, order


def cell(data, ref):
    case, system, x, metric = ref.strip().strip('`').split('/')
    return data.get((case, system, int(x), metric), math.nan)


def evaluate(data, measure):
    """A cell, or a quotient of two sums of cells."""
    measure = measure.strip().strip('`')
    sums = [sum(cell(data, term) for term in side.split(' + ')) for side in measure.split(' / ')]
    if len(sums) == 1:
        return sums[0]
    if len(sums) != 2 or sums[1] == 0:
        return math.nan
    return sums[0] / sums[1]


def parse_goal(text):
    m = re.match(r'^\s*(≥|>=|≤|<=)\s*([0-9.]+)\s*(×|%|µs|pairs)?\s*$', text)
    if not m:
        raise ValueError('goal %r: write "≥ N" or "≤ N" with a unit' % text)
    at_least = m.group(1) in ('≥', '>=')
    unit = m.group(3) or '×'
    goal = float(m.group(2))
    if unit == '%':
        goal /= 100
    return at_least, goal, unit


def fmt(value, unit):
    if math.isnan(value):
        return 'not measured'
    if math.isinf(value):
        return '∞'
    if unit == '%':
        return '%.1f %%' % (value * 100)
    if unit == 'µs':
        return '%.0f µs' % value
    if unit == 'pairs':
        return '%.0f pairs' % value
    return '%.2f×' % value


def verdict(value, at_least, goal, unit):
    if math.isnan(value):
        return 'not measured'
    if (value >= goal) if at_least else (value <= goal):
        return 'met'
    if unit in ('×',) and goal:
        gap = abs(value - goal) / goal * 100
        return '**missed** by %.*f %%' % (1 if gap < 10 else 0, gap)
    return '**missed**'


def tables(doc, marker):
    """The rows of the markdown table that follows the line <!-- marker -->."""
    lines = open(doc, encoding='utf-8').read().split('\n')
    try:
        start = lines.index('<!-- %s -->' % marker)
    except ValueError:
        raise SystemExit('render.py: no "<!-- %s -->" table in %s' % (marker, doc))
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith('|'):
            if rows:
                break
            continue
        cells = [c.strip() for c in re.split(r'(?<!\\)\|', line.strip())[1:-1]]
        if set(''.join(cells)) <= set('-: '):
            continue
        rows.append(cells)
    return rows[1:]  # without the header


def key_figures(data, order):
    def one(case, system, x, metric):
        v = data.get((case, system, x, metric), math.nan)
        if math.isnan(v):
            return '–'
        ref = data.get((case, REFERENCE, x, metric), math.nan)
        ratio = '' if math.isnan(ref) or ref == 0 else ' (%.2f×)' % (v / ref)
        return ('%.0f' % v if v >= 100 else '%.1f' % v) + ratio

    systems = []
    for case in ('uncontended', 'contended', 'keep-alive'):
        for s in order.get(case, []):
            if s not in systems:
                systems.append(s)
    out = ['| system | pairs/s, 1 client | pairs/s, 8 clients | acquire p50 µs, 1 client | release p50 µs, 1 client '
           '| contended critical sections/s, 8 clients | renewals/s, 8 clients |',
           '|---|---:|---:|---:|---:|---:|---:|']
    for s in systems:
        out.append('| %s | %s | %s | %s | %s | %s | %s |' % (
            s, one('uncontended', s, 1, 'pairs_per_s'), one('uncontended', s, 8, 'pairs_per_s'),
            one('uncontended', s, 1, 'acq_p50_us'), one('uncontended', s, 1, 'rel_p50_us'),
            one('contended', s, 8, 'cs_per_s'), one('keep-alive', s, 8, 'renewals_per_s')))
    return '\n'.join(out)


def targets(doc):
    """name -> (measure, goal text), in the doc's order."""
    out = OrderedDict()
    for row in tables(doc, 'targets'):
        name, measure, goal = row[0], row[1], row[2]
        if name in out:
            raise SystemExit('render.py: target %r is written twice in %s' % (name, doc))
        parse_goal(goal)
        out[name] = (measure, goal)
    return out


def floors(doc, goals):
    """[(target name, floor, floor measure, pg_dlock ÷ floor measure)]; each names a target of the doc."""
    out = []
    for row in tables(doc, 'floors'):
        name, floor, floor_measure, dlock_measure = row[:4]
        if name not in goals:
            raise SystemExit('render.py: the floor %r names no target of %s (a floor names its target by its '
                             'exact name)' % (name, doc))
        out.append((name, floor, floor_measure, dlock_measure))
    return out


def floor_verdict(data, measure, goal):
    """Whether a floor, measured in this run, is within its target's goal."""
    at_least, g, unit = parse_goal(goal)
    value = evaluate(data, measure)
    if math.isnan(value):
        return 'not measured'
    within = (value >= g) if at_least else (value <= g)
    return 'yes' if within else '**no**: out of reach here'


def farm_figures(data):
    """The farm case (bench/farm.sh --tsv): pairs/s and mean ms per pair; empty when the run has none."""
    rows = [('single partition', 'single-partition', 1), ('through the proxy', 'proxy', 1),
            ('single partition', 'single-partition', 8), ('through the proxy', 'proxy', 8),
            ('direct routing, 2 clients on each partition', 'direct-routing', 8)]
    if not any(k[0] == 'farm' for k in data):
        return ''
    out = ['| lock farm, 4 partitions on this machine (`bench/farm.sh`) | clients | pairs/s | ms per pair (mean) |',
           '|---|---:|---:|---:|']
    for label, system, clients in rows:
        rate = data.get(('farm', system, clients, 'pairs_per_s'), math.nan)
        ms = data.get(('farm', system, clients, 'pair_mean_ms'), math.nan)
        out.append('| %s | %d | %s | %s |' % (label, clients, '–' if math.isnan(rate) else '%.0f' % rate,
                                              '–' if math.isnan(ms) else '%.3f' % ms))
    proxy = data.get(('farm', 'proxy', 1, 'pair_mean_ms'), math.nan)
    single = data.get(('farm', 'single-partition', 1, 'pair_mean_ms'), math.nan)
    if not math.isnan(proxy) and not math.isnan(single) and single > 0:
        out += ['', 'The proxy adds %.3f ms to a call at one client (%.2f× a direct pair).'
                % ((proxy - single) / 2, proxy / single)]
    return '\n'.join(out)


def target_table(data, goals, floor_rows):
    floor_of = {name: measure for name, _, measure, _ in floor_rows}
    out = ['| target | measured | goal | verdict | its floor within the goal? |', '|---|---:|---:|---|---|']
    for name, (measure, goal) in goals.items():
        at_least, g, unit = parse_goal(goal)
        value = evaluate(data, measure)
        floor = '–'
        if name in floor_of:
            floor = floor_verdict(data, floor_of[name], goal)
            if floor != 'not measured':
                floor += ' (%s)' % fmt(evaluate(data, floor_of[name]), unit)
        out.append('| %s | %s | %s | %s | %s |' % (name, fmt(value, unit), goal, verdict(value, at_least, g, unit),
                                                   floor))
    return '\n'.join(out)


def floor_table(data, goals, floor_rows):
    out = ['| target | floor | floor measured | goal | floor within the goal? | pg_dlock ÷ floor |',
           '|---|---|---:|---:|---|---:|']
    for name, floor, floor_measure, dlock_measure in floor_rows:
        goal = goals[name][1]
        unit = parse_goal(goal)[2]
        out.append('| %s | %s | %s | %s | %s | %s |' % (
            name, floor, fmt(evaluate(data, floor_measure), unit), goal, floor_verdict(data, floor_measure, goal),
            fmt(evaluate(data, dlock_measure), '×')))
    return '\n'.join(out)


def datablock(name, header, rows):
    lines = ['$%s << EOD' % name, ' '.join('"%s"' % h for h in header)]
    for label, values in rows:
        lines.append(' '.join([label] + ['?' if math.isnan(v) else repr(v) for v in values]))
    lines.append('EOD')
    return '\n'.join(lines)


def plots(data, order, out_dir):
    """A gnuplot script for the plots of the cases the run has."""
    gp = ['set datafile missing "?"', 'set terminal TERM size 1000,560',
          'set linetype cycle 10', 'set key outside right']
    xs = lambda case, system: sorted({k[2] for k in data if k[0] == case and k[1] == system})
    ok = lambda case: [s for s in order.get(case, []) if any(k[0] == case and k[1] == s for k in data)]

    systems = ok('uncontended')
    if systems:
        clients = sorted({x for s in systems for x in xs('uncontended', s)})
        gp.append(datablock('rate', ['clients'] + systems,
                            [(str(c), [data.get(('uncontended', s, c, 'pairs_per_s'), math.nan) for s in systems])
                             for c in clients]))
        gp += ["set output '%s/uncontended-throughput.png'" % out_dir,
               "set title 'uncontended: acquire + release pairs per second'",
               "set xlabel 'clients'; set ylabel 'pairs/s'; set logscale x 2; set logscale y 10; set grid",
               'plot for [i=2:%d] $rate using 1:i with linespoints lw 2 title columnheader(i)' % (len(systems) + 1),
               'unset logscale; unset xlabel; unset ylabel; unset grid']
        low = clients[0]
        metrics = ['acq_p50_us', 'acq_p99_us', 'rel_p50_us', 'rel_p99_us']
        gp.append(datablock('lat', ['system', 'acquire p50', 'acquire p99', 'release p50', 'release p99'],
                            [('"%s"' % s, [data.get(('uncontended', s, low, m), math.nan) for m in metrics])
                             for s in systems]))
        gp += ["set output '%s/uncontended-latency.png'" % out_dir,
               "set title 'uncontended: latency at %d client(s), microseconds (log scale)'" % low,
               'set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1',
               "set logscale y 10; set ylabel 'µs'; set xtics rotate by -30",
               'plot $lat using 2:xtic(1) title columnheader(2), for [i=3:5] $lat using i title columnheader(i)',
               'unset logscale; set xtics norotate; unset ylabel']
    systems = ok('contended')
    if systems:
        clients = sorted({x for s in systems for x in xs('contended', s)})
        gp.append(datablock('cs', ['system'] + ['%d clients' % c for c in clients],
                            [('"%s"' % s, [data.get(('contended', s, c, 'cs_per_s'), math.nan) for c in clients])
                             for s in systems]))
        gp += ["set output '%s/contended.png'" % out_dir,
               "set title 'contended: critical sections per second, one name'",
               'set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1',
               "set ylabel 'critical sections/s'; set xtics rotate by -30; set yrange [0:*]",
               'plot for [i=2:%d] $cs using i:xtic(1) title columnheader(i)' % (len(clients) + 1),
               'set xtics norotate; unset ylabel; set autoscale y']
    systems = ok('scale')
    if systems:
        rows = sorted({x for s in systems for x in xs('scale', s) if x > 0})
        lat_cols, size_cols = [], []
        for s in systems:
            lat_cols += ['%s p50' % s, '%s p99' % s]
            size_cols += ['%s table' % s, '%s indexes' % s]
        gp.append(datablock('scale', ['rows'] + lat_cols, [(str(n), [v for s in systems for v in (
            data.get(('scale', s, n, 'acq_p50_us'), math.nan), data.get(('scale', s, n, 'acq_p99_us'), math.nan))])
            for n in rows]))
        gp.append(datablock('size', ['rows'] + size_cols, [(str(n), [v / 1048576.0 for s in systems for v in (
            data.get(('scale', s, n, 'table_bytes'), math.nan), data.get(('scale', s, n, 'index_bytes'), math.nan))])
            for n in rows]))
        gp += ["set output '%s/scale-latency.png'" % out_dir,
               "set title 'scale: acquire latency against lock rows (1 client)'",
               "set xlabel 'lock rows'; set ylabel 'µs (log scale)'; set logscale xy 10; set grid",
               'plot for [i=2:%d] $scale using 1:i with linespoints lw 2 title columnheader(i)' % (len(lat_cols) + 1),
               "set output '%s/scale-size.png'" % out_dir,
               "set title 'scale: table and index size against lock rows'; set ylabel 'MiB (log scale)'",
               'plot for [i=2:%d] $size using 1:i with linespoints lw 2 title columnheader(i)' % (len(size_cols) + 1)]
    return '\n'.join(gp) + '\n'


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--tsv', default=os.path.join(root, 'bench/results/latest.tsv'))
    parser.add_argument('--doc', default=os.path.join(root, 'docs/performance.md'))
    parser.add_argument('--out-dir', default=os.path.join(root, 'bench/results'))
    parser.add_argument('--update-doc', action='store_true')
    parser.add_argument('--no-plots', action='store_true')
    args = parser.parse_args()

    data, order = load(args.tsv)
    goals = targets(args.doc)
    floor_rows = floors(args.doc, goals)
    parts = [key_figures(data, order), farm_figures(data), target_table(data, goals, floor_rows),
             floor_table(data, goals, floor_rows)]
    summary = '\n\n'.join(p for p in parts if p) + '\n'
    with open(os.path.join(args.out_dir, 'summary.md'), 'w', encoding='utf-8') as f:
        f.write(summary)
    print(summary)

    if args.update_doc:
        text = open(args.doc, encoding='utf-8').read()
        begin, end = '<!-- rendered: begin -->', '<!-- rendered: end -->'
        if begin not in text or end not in text:
            raise SystemExit('render.py: no rendered block in %s' % args.doc)
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(args.doc, 'w', encoding='utf-8') as f:
            f.write(head + begin + '\n' + summary + end + tail)

    if not args.no_plots:
        term = 'pngcairo'
        probe = subprocess.run(['gnuplot', '-e', 'set terminal'], capture_output=True, text=True)
        if 'pngcairo' not in probe.stdout + probe.stderr:
            term = 'png'
        script = plots(data, order, args.out_dir).replace('TERM', term)
        result = subprocess.run(['gnuplot'], input=script, capture_output=True, text=True)
        if result.returncode != 0:
            print('render.py: gnuplot failed, plots are missing:\n' + result.stderr, file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
