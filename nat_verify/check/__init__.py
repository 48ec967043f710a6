"""The invariant catalogue and the engines that check it (see ``runner`` and ``catalogue``)."""

from nat_verify.check.runner import (
    CheckReport,
    check_objects,
    check_ruleset,
    families,
    verify_cluster,
)

__all__ = ["CheckReport", "check_objects", "check_ruleset", "families", "verify_cluster"]
