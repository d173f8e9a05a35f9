"""Checks the layering of the C extension against the table in
extension/README: each file (a .c and its .h) belongs to one layer and may
include only headers of its own layer and those below. Prints each
violation; exits 1 when there is one, or when a file is not in the table.
Usage: layers.py EXTENSION_DIR"""
import os
import re
import sys

directory = sys.argv[1]
layer_of = {}
with open(os.path.join(directory, "README")) as readme:
    for line in readme:
        match = re.match(r"layer (\d+) [a-z ]+:\s+(.*)$", line)
        if match:
            for module in match.group(2).split():
                layer_of[module] = int(match.group(1))

problems = []
if not layer_of:
    problems.append("README has no layer table")
for name in sorted(os.listdir(directory)):
    stem, ext = os.path.splitext(name)
    if ext not in (".c", ".h"):
        continue
    if stem not in layer_of:
        problems.append(f"{name}: not in the layer table of README")
        continue
    with open(os.path.join(directory, name)) as source:
        for number, line in enumerate(source, 1):
            include = re.match(r'\s*#\s*include\s+"([^"/]+)\.h"', line)
            if not include:
                continue
            header = include.group(1)
            if not os.path.exists(os.path.join(directory, header + ".h")):
                continue  # a PostgreSQL header
            if header not in layer_of:
                problems.append(f"{name}:{number}: includes {header}.h, which is not in the layer table")
            elif layer_of[header] > layer_of[stem]:
                problems.append(f"{name}:{number}: layer {layer_of[stem]} includes {header}.h of layer {layer_of[header]}")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
