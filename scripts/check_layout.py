#!/usr/bin/env python3
"""The layout rules a reader relies on, checked: no import circles between source files, and
no source file (outside tests) longer than a reader can hold.

An import is a reference from one file to an item defined in another file of the same crate
(`use crate::a::b::X`, `super::X`, or a `crate::a::X` path in code). A reference that lands on a
`mod.rs` or `lib.rs` item re-exported from a child (`pub use child::X`) is followed to the child.
A file and the module files above it (its `mod.rs` and `lib.rs` ancestors) are not counted as
importing each other: declaring and re-exporting children is what those files are for.

Usage: scripts/check_layout.py [--max-lines N] [--list]   (exit 1 on a circle or a long file)
"""

import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def is_test_file(rel):
    """Files that hold only tests or test scaffolding."""
    base = os.path.basename(rel)
    parts = rel.split(os.sep)
    return (
        "tests" in parts
        or "benches" in parts
        or "examples" in parts
        or base in ("tests.rs", "testing.rs")
        or base.endswith("_tests.rs")
    )


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def cfg_test_removed(text):
    """Drop `#[cfg(test)] mod x { ... }` blocks: what tests import is not the file's design."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.replace(" ", "").replace("\n", "")
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0]]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        for e in expand_use(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path tuple -> relative file
        for dirpath, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    rel = os.path.relpath(os.path.join(dirpath, n), src)
                    self.files[self.modpath(rel)] = rel
        self.text = {}
        for mp, rel in self.files.items():
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                self.text[rel] = cfg_test_removed(strip_comments(f.read()))
        self.reexports = {rel: self.find_reexports(mp, rel) for mp, rel in self.files.items()}

    @staticmethod
    def modpath(rel):
        parts = rel[:-3].split(os.sep)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        return tuple(parts)

    def is_dir_module(self, rel):
        return os.path.basename(rel) in ("mod.rs", "lib.rs", "main.rs")

    def find_reexports(self, mp, rel):
        """name -> absolute module path the name comes from, for `pub use` in this file."""
        out = {}
        for m in re.finditer(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", self.text[rel]):
            for path in expand_use(m.group(1)):
                segs = self.absolute(mp, rel, path.split("::"))
                if segs is None or not segs:
                    continue
                name = path.split("::")[-1].split(" as ")[-1]
                out[name] = tuple(segs)
        return out

    def absolute(self, mp, rel, segs):
        """A path as written in file `rel` (module `mp`) -> absolute module path segments."""
        segs = [s for s in segs if s]
        if not segs:
            return None
        base = list(mp) if self.is_dir_module(rel) else list(mp)
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] == "self":
            return base + segs[1:]
        if segs[0] == "super":
            cur = base
            while segs and segs[0] == "super":
                cur = cur[:-1]
                segs = segs[1:]
            return cur + segs
        if (*base, segs[0]) in self.files:
            return base + segs
        return None  # an external crate or a local item

    def resolve(self, segs, depth=0):
        """Absolute path -> the file defining the item (following re-exports)."""
        for k in range(len(segs), -1, -1):
            mp = tuple(segs[:k])
            if mp in self.files:
                rel = self.files[mp]
                rest = segs[k:]
                if rest and depth < 8 and rest[0] in self.reexports[rel]:
                    target = list(self.reexports[rel][rest[0]])
                    if target != list(segs):
                        return self.resolve(target + rest[1:], depth + 1)
                return rel
        return None

    def ancestors(self, rel):
        mp = self.modpath(rel)
        if self.is_dir_module(rel):
            mp = mp[:-1] if mp else None
            if mp is None:
                return set()
        else:
            mp = mp[:-1]
        out = set()
        while True:
            if mp in self.files:
                out.add(self.files[mp])
            if not mp:
                break
            mp = mp[:-1]
        return out

    def imports(self, rel):
        mp = self.modpath(rel)
        text = self.text[rel]
        paths = []
        for m in re.finditer(r"(?<!pub )\buse\s+([^;]+);", text):
            if re.match(r"pub(\([^)]*\))?\s*$", text[max(0, m.start() - 12) : m.start()].strip()[-12:]):
                continue
            paths += expand_use(m.group(1))
        for m in re.finditer(r"\b((?:crate|super)(?:::" + IDENT + r")+)", text):
            paths.append(m.group(1))
        out = set()
        for p in paths:
            segs = self.absolute(mp, rel, p.split("::"))
            if segs is None:
                continue
            target = self.resolve(segs)
            if target and target != rel:
                out.add(target)
        anc = self.ancestors(rel)
        return {t for t in out if t not in anc and rel not in self.ancestors(t)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-lines", type=int, default=700)
    ap.add_argument("--list", action="store_true", help="print every file's line count")
    a = ap.parse_args()
    crates_dir = os.path.join(ROOT, "crates")
    bad = 0
    for name in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, name, "src")
        if not os.path.isdir(src):
            continue
        crate = Crate(src)
        edges = {rel: crate.imports(rel) for rel in crate.text if not is_test_file(rel)}
        edges = {rel: {t for t in out if t in edges or not is_test_file(t)} for rel, out in edges.items()}
        for a_rel in sorted(edges):
            for b_rel in sorted(edges[a_rel]):
                if a_rel < b_rel and a_rel in edges.get(b_rel, ()):
                    print(f"circle: crates/{name}/src/{a_rel} <-> crates/{name}/src/{b_rel}")
                    bad += 1
        # A file and a folder module it is not inside: the file imports something in the
        # folder and something in the folder imports the file.
        dirs = sorted({os.path.dirname(r) for r in edges if os.path.dirname(r)})
        for d in dirs:
            inside = [r for r in edges if r.startswith(d + os.sep)]
            for a_rel in sorted(edges):
                if a_rel.startswith(d + os.sep):
                    continue
                out = sorted(b for b in edges[a_rel] if b in inside)
                back = sorted(b for b in inside if a_rel in edges[b])
                pairs = [b for b in out if b in back]
                if out and back and not pairs and not any(
                    os.path.dirname(b) != d and os.path.dirname(b).startswith(d) for b in out + back
                ):
                    print(f"circle: crates/{name}/src/{a_rel} <-> crates/{name}/src/{d}/ "
                          f"(imports {', '.join(out)}; imported by {', '.join(back)})")
                    bad += 1
        for rel in sorted(crate.files.values()):
            if is_test_file(rel):
                continue
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                n = sum(1 for _ in f)
            if a.list:
                print(f"{n:6} crates/{name}/src/{rel}")
            if n > a.max_lines:
                print(f"long file: crates/{name}/src/{rel} has {n} lines (at most {a.max_lines})")
                bad += 1
    if bad:
        print(f"check_layout: {bad} problem(s)", file=sys.stderr)
        return 1
    print("check_layout: no import circles, no source file over", a.max_lines, "lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
