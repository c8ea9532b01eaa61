"""An independent judge of `attncli check`: simulated students who work exercises by hand.

Nothing here imports attncli. The students read the problem YAML themselves, compute every step
with numpy at 4 decimals (carrying their own rounded numbers, as a person does), make the classic
mistakes of issue 10 by replaying them at the step where they happen, and write answer files that
only the public command line (`python -m attncli check --format json`) grades.
"""
