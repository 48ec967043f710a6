"""Reserved for the Z3 encoding of a ruleset (DESIGN.md: the only package that imports z3).

Not built yet. Today ``proved`` comes from ``nat_verify.check.atoms``: an exhaustive
enumeration of one packet per equivalence class, each traced by the interpreter, which is exact
for the model but slow on very large dumps; a symbolic encoding is the way to make that fast.
"""
