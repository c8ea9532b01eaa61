"""The npz writer: every step of every head by its JSON name and place (`heads/0/weights`), the concatenation and
the final `output`, with the tokens and the mask; the online softmax's trace and the gradients when there are any."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from attncli.steps import DOCUMENTED_SHARED_STEPS, SAVED_HEAD_STEPS, each

if TYPE_CHECKING:
    import numpy as np

    from attncli.core import Steps


def npz_arrays(steps: Steps) -> dict[str, np.ndarray]:
    """Every step of every head by its JSON name and place (`heads/0/weights`), the concatenation and the
    final `output`, with the tokens and the mask; masked scores are -inf, a step a problem lacks is absent;
    the gradients, when asked for, by their JSON paths under `backward/`."""
    import numpy as np

    problem = steps.problem
    arrays = {"tokens": np.array(problem.tokens), "query_tokens": np.array(problem.query_tokens), "mask": problem.mask}
    for number, head in enumerate(steps.heads):
        arrays |= {f"heads/{number}/{step.field}": found for step, found in each(steps, SAVED_HEAD_STEPS, number)}
        if head.logsumexp is not None:  # `stable:`, `tiles:`: the log-sum-exp, and the online softmax's trace
            from attncli.render import tiles

            arrays |= tiles.npz_arrays(head, number)
    arrays |= {step.field: found for step, found in each(steps, DOCUMENTED_SHARED_STEPS)}
    if steps.backward is not None:  # every gradient under backward/...
        from attncli.render import backward_doc

        arrays |= backward_doc.npz_arrays(steps.backward)
    return arrays


def npz(steps: Steps) -> Callable[[BinaryIO], None]:
    """The .npz file of `npz_arrays`, written array by array into the stream it is given (never whole in memory)."""
    import numpy as np

    arrays = npz_arrays(steps)
    save: Callable[..., None] = np.savez  # its stubs take **arrays for its keyword allow_pickle
    return lambda stream: save(stream, **arrays)
