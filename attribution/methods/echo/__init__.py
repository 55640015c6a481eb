"""ECHO, the method registered as ``echo`` (:mod:`.method`: both variants, and the project variant's panels).

Its parts live in modules of their own: the paper variant's decoupled analysts (:mod:`.analysts`) and consensus
(:mod:`.consensus`), A.3's regex extraction of the context levels (:mod:`.extraction`), the hierarchical context
both variants show (:mod:`.context`) and the project variant's vote (:mod:`.vote`).
"""

from attribution.methods.echo.method import echo

__all__ = ["echo"]
