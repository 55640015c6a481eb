"""CHIEF, the method registered as ``chief`` (:mod:`.method`: both variants, and the project variant's pipeline).

Its stages live in modules of their own: the paper variant's graph (:mod:`.hcg`: A decomposition, B OTAR, C
edges) and attribution (:mod:`.paper`: D oracles, E backtracking, F counterfactual attribution); the project
variant's causal graph (:mod:`.graph`, the regex graph and the graph's structure; :mod:`.model_graph`, the
model's), virtual oracles (:mod:`.oracle`), candidate sets per level (:mod:`.levels`) and counterfactual
screening (:mod:`.counterfactual`); the exemplar pool both retrieve from (:mod:`.exemplars`, ``exemplars.json``).
"""

from attribution.methods.chief.method import chief

__all__ = ["chief"]
