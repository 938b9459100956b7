#!/usr/bin/env python3
"""Strongly connected components of a crate's file imports (`crate::` / `super::` paths).

Usage: scripts/import-cycles.py crates/rtlab-lab/src [-v]   (-v: every file's imports too)
Reads every .rs file, drops comments and `#[cfg(test)]` modules, resolves each
`crate::a::b` / `super::a` path (brace groups expanded) to the deepest module file that
exists, and prints the strongly connected components with more than one file, largest first.
"""
import os, re, sys

root = sys.argv[1].rstrip('/')
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3].split(os.sep)
            if rel[-1] in ('lib', 'main'):
                rel = rel[:-1]
            elif rel[-1] == 'mod':
                rel = rel[:-1]
            files[tuple(rel)] = p

# comments and string literals, in one pass (a `//` inside a string is no comment, a path
# inside a string or a comment is no import)
LEXEMES = re.compile(r'r(#+)".*?"\1|//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'', re.S)

def strip(text):
    text = LEXEMES.sub(lambda m: '""' if m.group(0)[:1] in 'r"' else ' ', text)
    m = re.search(r'#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{', text)
    if m:
        text = text[:m.start()]
    # nested inline test modules declared as files are separate files; fine
    return text

def expand(s, i):
    """parse a use-tree tail starting at s[i] (after a '::' or '{'); return (paths, i)."""
    paths = []
    seg = []
    while i < len(s):
        m = re.match(r'\s*(\w+|\*)\s*', s[i:])
        if m:
            seg.append(m.group(1)); i += m.end()
            if s.startswith('::', i):
                i += 2
                if s[i:].lstrip().startswith('{'):
                    i = s.index('{', i) + 1
                    subs = []
                    while True:
                        sub, i = expand(s, i)
                        subs += sub
                        j = re.match(r'\s*', s[i:]).end(); i += j
                        if s[i] == ',':
                            i += 1
                            if s[i:].lstrip().startswith('}'):
                                i = s.index('}', i) + 1; break
                            continue
                        if s[i] == '}':
                            i += 1; break
                    return [seg + x for x in subs] or [seg], i
                continue
            return [seg], i
        return [seg], i
    return [seg], i

def imports(mod, text):
    out = set()
    for m in re.finditer(r'\b(crate|super)::', text):
        rest = text[m.end():m.end() + 2000]
        if rest.lstrip().startswith('{'):
            # `use super::{a, b}`: the group as if it followed a name
            paths, _ = expand('_::' + rest, 0)
            paths = [p[1:] for p in paths]
        else:
            paths, _ = expand(text, m.end())
        for p in paths:
            if m.group(1) == 'crate':
                base = []
            else:
                base = list(mod[:-1])
                while p and p[0] == 'super':
                    base = base[:-1]; p = p[1:]
            full = tuple(base + [x for x in p if x not in ('self', '*')])
            while full and full not in files:
                full = full[:-1]
            if full != mod and full in files and full != ():
                out.add(full)
    # a parent module naming its child modules by bare path (`use read::X`, `read::f()`)
    for m in re.finditer(r'(?<![:\w])(\w+)::', text):
        child = mod + (m.group(1),)
        if m.group(1) not in ('crate', 'super', 'self') and child in files:
            out.add(child)
    return out

edges = {m: imports(m, strip(open(p).read())) for m, p in files.items()}

# Tarjan
index, low, on, stack, sccs, n = {}, {}, set(), [], [], [0]
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        sccs.append(c)
for v in sorted(files):
    if v not in index:
        visit(v)
name = lambda m: os.path.relpath(files[m], root)
big = sorted((c for c in sccs if len(c) > 1), key=len, reverse=True)
print(f'{len(files)} files; {len(big)} import cycles')
for c in big:
    print(f'  {len(c)} files: ' + ' '.join(sorted(name(m) for m in c)))
if '-v' in sys.argv:
    for m in sorted(files):
        print(name(m), '->', ' '.join(sorted(name(w) for w in edges[m])))
