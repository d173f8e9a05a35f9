#!/usr/bin/env python3
"""Checks that the documentation covers what pg_dlock ships and that its links resolve.

  check_docs.py --docs DIR [--readme FILE] [--catalog] [--sources DIR] [--cli PATH]

--docs DIR     the docs/ directory (reference.md and cli.md are read from it)
--readme FILE  README.md, whose relative links are checked with those of DIR/*.md
--catalog      every function and view (and table and type) of schema dlock of the
               extension installed in the database the PG* environment points at, and
               every dlock.* setting in pg_settings, must appear in DIR/reference.md
--sources DIR  every PD SQLSTATE the C sources under DIR define
               (MAKE_SQLSTATE('P','D',...)) must appear in DIR/reference.md
--cli PATH     every subcommand that `PATH --help` lists, and every option of
               `PATH --help` and `PATH SUB --help`, must appear in DIR/cli.md

Each problem is printed on a line of its own starting with "missing:" or "broken link:";
the exit status is 1 when there is any, 0 otherwise.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

problems = []


def problem(text):
    problems.append(text)
    print(text)


def prose(text):
    """The text outside fenced code blocks, with inline code spans kept apart."""
    out = []
    fence = None
    for line in text.split('\n'):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith('```') or stripped.startswith('~~~')):
            fence = stripped[:3]
            out.append('')
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append('')
            continue
        out.append(line)
    return out


def code_spans(text):
    """Every inline code span's content, in and outside tables."""
    spans = []
    for line in prose(text):
        spans += re.findall(r'`([^`]+)`', line)
    return spans


def slug(heading, seen):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'<[^>]+>', '', heading.strip()).lower()
    text = re.sub(r'[^\w\- ]', '', text).replace(' ', '-')
    if text in seen:
        seen[text] += 1
        return '%s-%d' % (text, seen[text])
    seen[text] = 0
    return text


def anchors(path):
    seen = {}
    result = set()
    for line in prose(open(path, encoding='utf-8').read()):
        m = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if m:
            result.add(slug(m.group(2), seen))
    return result


def check_links(files):
    for path in files:
        text = open(path, encoding='utf-8').read()
        for number, line in enumerate(prose(text), 1):
            line = re.sub(r'`[^`]*`', '', line)
            for target in re.findall(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)', line):
                if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition('#')
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(resolved):
                    problem('broken link: %s:%d: %s (no file %s)' % (path, number, target, resolved))
                    continue
                if anchor and resolved.endswith('.md') and anchor not in anchors(resolved):
                    problem('broken link: %s:%d: %s (no heading #%s in %s)' % (path, number, target, anchor, resolved))


def psql(query):
    out = subprocess.run(['psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-c', query],
                         check=True, capture_output=True, text=True).stdout
    return [l for l in out.split('\n') if l]


def mentioned(name, spans):
    """True when a code span names the object: `name(...`, `dlock.name`, `name`."""
    pattern = re.compile(r'(^|[^\w.])(dlock\.)?%s($|[^\w])' % re.escape(name))
    return any(pattern.search(span) for span in spans)


def check_catalog(reference, spans):
    objects = psql("""
        SELECT 'function ' || p.proname FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_dlock'
         WHERE p.pronamespace = 'dlock'::regnamespace
        UNION
        SELECT CASE c.relkind WHEN 'v' THEN 'view ' WHEN 'r' THEN 'table ' ELSE 'type ' END || c.relname
          FROM pg_class c
          JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_dlock'
         WHERE c.relnamespace = 'dlock'::regnamespace AND c.relkind IN ('v', 'r', 'c')
        UNION
        SELECT 'type ' || t.typname FROM pg_type t
          JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_dlock'
         WHERE t.typnamespace = 'dlock'::regnamespace
        ORDER BY 1""")
    settings = psql("SELECT 'setting ' || name FROM pg_settings WHERE name LIKE 'dlock.%' ORDER BY 1")
    if not objects:
        problem('missing: no object of extension pg_dlock in the database (is it installed?)')
    for entry in objects + settings:
        kind, name = entry.split(' ', 1)
        if not mentioned(name, spans):
            problem('missing: %s %s in %s' % (kind, name, reference))
    return len(objects) + len(settings)


def check_sqlstates(reference, spans, sources):
    codes = set()
    for path in glob.glob(os.path.join(sources, '**', '*.[ch]'), recursive=True):
        text = open(path, encoding='utf-8', errors='replace').read()
        for chars in re.findall(r"MAKE_SQLSTATE\(\s*'P'\s*,\s*'D'\s*,((?:\s*'.'\s*,?){3})\)", text):
            codes.add('PD' + ''.join(re.findall(r"'(.)'", chars)))
    if not codes:
        problem('missing: no PD SQLSTATE found under %s (has the way they are defined changed?)' % sources)
    for code in sorted(codes):
        if not any(span == code or span.startswith(code + ' ') for span in spans):
            problem('missing: SQLSTATE %s in %s' % (code, reference))
    return len(codes)


def help_text(args):
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    return result.stdout + result.stderr


def check_cli(cli, cli_md):
    text = open(cli_md, encoding='utf-8').read()
    top = help_text([cli, '--help'])
    subcommands = []
    section = None
    for line in top.split('\n'):
        if re.match(r'^\S.*:$', line):
            section = line[:-1]
            continue
        m = re.match(r'^  ([a-z][a-z-]*)\s{2,}\S', line)
        if section == 'Subcommands' and m:
            subcommands.append(m.group(1))
    if not subcommands:
        problem('missing: no subcommand found in `%s --help`' % cli)
    checked = 0
    for option in sorted(set(re.findall(r'(?<![\w-])(--[a-z][a-z-]*)', top))):
        checked += 1
        if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(option), text):
            problem('missing: option dlock %s in %s' % (option, cli_md))
    for sub in subcommands:
        checked += 1
        if not re.search(r'dlock (\[[^\]]*\] )*%s(?![\w-])' % re.escape(sub), text):
            problem('missing: subcommand dlock %s in %s' % (sub, cli_md))
        usage = help_text([cli, sub, '--help'])
        options = usage.split('Options:', 1)[1] if 'Options:' in usage else usage
        # Only the option lines of the help, not the options its examples use.
        found = set()
        for line in options.split('\n'):
            if not re.match(r'^\s{2}-', line):
                continue
            for option in re.findall(r'(?<![\w-])(--[a-z][a-z-]*)', line.split('  ', 2)[1] if '  ' in line.strip() else line):
                if option == '--help' or option in found:
                    continue
                found.add(option)
                checked += 1
                if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(option), text):
                    problem('missing: option dlock %s %s in %s' % (sub, option, cli_md))
    return checked


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--docs', required=True)
    parser.add_argument('--readme')
    parser.add_argument('--catalog', action='store_true')
    parser.add_argument('--sources')
    parser.add_argument('--cli')
    args = parser.parse_args()

    reference = os.path.join(args.docs, 'reference.md')
    spans = code_spans(open(reference, encoding='utf-8').read()) if os.path.exists(reference) else []
    if not os.path.exists(reference):
        problem('missing: %s' % reference)
    files = sorted(glob.glob(os.path.join(args.docs, '*.md')))
    if args.readme:
        files.insert(0, args.readme)
    check_links(files)
    counted = ['%d files linked' % len(files)]
    if args.catalog:
        counted.append('%d catalog objects and settings' % check_catalog(reference, spans))
    if args.sources:
        counted.append('%d PD SQLSTATEs' % check_sqlstates(reference, spans, args.sources))
    if args.cli:
        counted.append('%d subcommands and options' % check_cli(args.cli, os.path.join(args.docs, 'cli.md')))
    print('checked: ' + ', '.join(counted) + '; %d problems' % len(problems))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
