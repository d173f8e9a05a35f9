"""Checks that programs built on the C++ library (the dlock tool, the
examples) include only its public headers, client/include/dlock/*.hpp, as
any other program using the installed library must: the headers of
client/src are internal and not installed. A quoted include must name a
file beside the including one. Prints each violation; exits 1 when there is
one.
Usage: public_headers.py CLIENT_DIR PROGRAM_DIR..."""
import os
import re
import sys

client, programs = sys.argv[1], sys.argv[2:]
internal = set(os.listdir(os.path.join(client, "src")))
problems = []
for directory in programs:
    for name in sorted(os.listdir(directory)):
        if os.path.splitext(name)[1] not in (".cpp", ".hpp"):
            continue
        path = os.path.join(directory, name)
        with open(path) as source:
            for number, line in enumerate(source, 1):
                include = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
                if not include:
                    continue
                quoted, header = include.group(1) == '"', include.group(2)
                where = f"{path}:{number}: {header}"
                if quoted:
                    if "/" in header or not os.path.exists(os.path.join(directory, header)):
                        problems.append(f"{where} is quoted but not a file beside {name}")
                elif os.path.basename(header) in internal:
                    problems.append(f"{where} is an internal header of {client}/src")
                elif header.startswith("dlock/") and not os.path.exists(os.path.join(client, "include", header)):
                    problems.append(f"{where} is not a public header of {client}/include")
if not programs:
    problems.append("no program directory given")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
