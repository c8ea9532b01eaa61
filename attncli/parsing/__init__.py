"""From YAML documents (and command-line flags) to validated records: a `Problem`, its `Answers`.

fields.py reads typed values and says where a bad one sits, for every input section;
problem_file.py assembles a problem from tokens, heads.py (Q, K, V and which field a head
uses), scores.py (the score function) and masks.py (causal, window, padding, 0/1 rows);
answers.py reads the `answers:` a student wrote against the calculation.
"""
