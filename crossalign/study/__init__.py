"""Studies: controlled comparisons of run configs at equal budget, run by one command.

``spec`` reads a study file (schema, variables, expansion into runs), ``steps`` runs its
``prepare`` steps, ``plan`` says what is done and what is left, ``run`` does the rest and
``summary`` holds what the report adds; ``derived`` is the derived-language study
(``crossalign study derived``)."""
