"""The gradebook of a real course: points and partial credit, the class list, one record per student, the class
at a glance.

Pure functions over frozen records, read from what grading already makes (attncli.grading's `Report`,
`StepReport` and `Cell`; attncli.grading.submissions' `Result`): `check` wires them to its options, and the renderers
(attncli.render.gradebook, attncli.render.feedback) write them for Gradescope, Canvas, Moodle and students.
Domain code: nothing here imports attncli.render or attncli.cli.

- `points`: a key's `points:` (`PointsSpec`), the cells a key asks for (`KeyCells`) and the `Score` a report earns.
- `roster`: a class list CSV (Canvas, Moodle or any), its students, and which file belongs to whom (`Placement`).
- `records`: one `StudentRecord` per student or file, what every gradebook format writes.
- `glance`: per step, how many students answered it, got it right, carried, wrong, and the commonest causes.
"""
