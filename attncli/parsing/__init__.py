"""From a YAML document (and command-line flags) to a validated `attncli.problem.Problem`.

fields.py reads typed values and says where a bad one sits, for every input section;
problem_file.py assembles a problem from tokens, heads.py (Q, K, V and which field a head
uses), scores.py (the score function) and masks.py (causal, window, padding, 0/1 rows).
"""
