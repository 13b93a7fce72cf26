import torch

from crossalign.data.masking import IGNORE_INDEX, mask_tokens


def test_rates_and_specials():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 1000, (400, 1000))
    ids[:, 0] = 0
    ids[:, -50:] = 1  # padding
    maskable = (ids != 0) & (ids != 1)
    inputs, labels = mask_tokens(ids, maskable, 4, torch.arange(10, 1000), g)
    selected = labels != IGNORE_INDEX
    assert not selected[~maskable].any()
    assert torch.equal(inputs[~maskable], ids[~maskable])
    assert torch.equal(labels[selected], ids[selected])
    rate = selected.sum() / maskable.sum()
    assert abs(rate - 0.15) < 0.005
    masked = (inputs == 4) & selected
    kept = (inputs == ids) & selected
    changed = ~masked & ~kept & selected
    n = selected.sum()
    assert abs(masked.sum() / n - 0.8) < 0.01
    # a random replacement can draw the original id (prob 1/990), counted as kept
    assert abs(changed.sum() / n - 0.1) < 0.01
    assert abs(kept.sum() / n - 0.1) < 0.01
    assert ((inputs[changed] >= 10) & (inputs[changed] < 1000)).all()


def test_same_generator_same_masks():
    ids = torch.randint(5, 50, (4, 16))
    a = mask_tokens(ids, ids > 0, 4, torch.arange(5, 50), torch.Generator().manual_seed(3))
    b = mask_tokens(ids, ids > 0, 4, torch.arange(5, 50), torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
