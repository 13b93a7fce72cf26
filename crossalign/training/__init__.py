"""Pre-training: ``train`` runs the one training loop (``loop``) on a ``RunConfig``.

``setup`` builds the model, objectives and data from the config, ``loader`` and ``sampler``
draw and collate each step's batches, ``step`` takes an optimizer step, ``log_stats`` keeps
the log's sums, ``checkpointing`` writes and resumes checkpoints and ``probes`` measures
alignment during training.
"""

from crossalign.training.loop import train

__all__ = ["train"]
