"""Micro-batches that mix samples with and without teacher data (Combine: a hint accepted or not)."""

import torch

from slime.backends.fsdp.batching import collate


def _row(n_prompt, n_resp, teacher=None, topk=None):
    row = {"tokens": list(range(1, n_prompt + n_resp + 1)), "response_length": n_resp, "loss_mask": [1] * n_resp}
    if teacher is not None:
        row["teacher_log_probs"] = teacher
    if topk is not None:
        row["teacher_topk_log_probs"], row["teacher_topk_indices"] = topk
    return row


def test_mixed_teacher_rows_get_a_mask_instead_of_being_dropped():
    rows = [_row(2, 3), _row(3, 2, teacher=[-1.0, -2.0]), _row(1, 3, teacher=[-0.5, -0.5, -0.5])]
    batch = collate(rows, [0, 1, 2], pad_token_id=0)
    assert torch.equal(batch.fields["teacher_log_probs"][1, :2], torch.tensor([-1.0, -2.0]))
    assert torch.equal(batch.fields["teacher_mask"], torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]))


def test_all_or_no_teacher_rows_need_no_mask():
    full = collate([_row(2, 2, teacher=[-1.0, -1.0]), _row(2, 1, teacher=[-2.0])], [0, 1], pad_token_id=0)
    assert "teacher_mask" not in full.fields and "teacher_log_probs" in full.fields
    none = collate([_row(2, 2), _row(2, 1)], [0, 1], pad_token_id=0)
    assert "teacher_log_probs" not in none.fields


def test_topk_fields_when_the_first_row_has_none():
    topk = ([[-0.1, -2.0], [-0.2, -1.9]], [[4, 5], [6, 7]])
    batch = collate([_row(2, 2), _row(2, 2, topk=topk)], [0, 1], pad_token_id=0)
    assert batch.fields["teacher_topk_indices"].shape == (2, 2, 2)
    assert batch.fields["teacher_topk_indices"][1].tolist() == [[4, 5], [6, 7]]
    assert batch.fields["teacher_topk_log_probs"][0].abs().sum() == 0
