"""玩具语言（第 5 讲）和主谓一致评估的测试：每个测试对应书里的一个说法。"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from transformer_book import toy_language as tl
from transformer_book.lecture07.agreement import (
    agreement_accuracy,
    agreement_table,
    attention_to_subject,
    longest_prefix,
    mean_distance,
    verb_margins,
)

VOCAB = tl.build_vocab()


# ---------------------------------------------------------------------------
# 语料
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    return tl.generate_corpus(20_000, seed=0)


def test_every_generated_sentence_is_grammatical_and_agrees(corpus):
    for sentence in corpus:
        p = tl.parse(sentence)  # 不合语法会抛 ValueError
        assert p.agrees, " ".join(sentence)
        assert tl.verb_number(sentence[p.verb_pos]) == p.subject_plural
        for m in p.modifiers:
            if m.kind == "rc":  # 关系从句里的动词也和主语一致
                assert tl.verb_number(sentence[m.verb_pos]) == p.subject_plural


def test_sentences_start_with_bos_and_end_with_eos(corpus):
    assert all(s[0] == "<s>" and s[-1] == "</s>" for s in corpus)
    assert all("<s>" not in s[1:] and "</s>" not in s[:-1] for s in corpus)


def test_training_sentences_have_at_most_20_tokens(corpus):
    """书：训练语料最多 3 个修饰语，最长的句子 20 个词元（含 <s>、</s>）。"""
    lengths = [len(s) for s in corpus]
    assert max(lengths) == 20
    assert max(tl.parse(s).n_modifiers for s in corpus) == 3


@pytest.mark.parametrize("probs", [tl.TRAIN_MODIFIER_PROBS, (0.6, 0.4), (0.1, 0.2, 0.3, 0.4)])
def test_modifier_counts_follow_modifier_probs(probs):
    n = 20_000
    counts = Counter(tl.parse(s).n_modifiers for s in tl.generate_corpus(n, modifier_probs=probs, seed=1))
    assert set(counts) <= set(range(len(probs)))
    for k, p in enumerate(probs):
        # 标准差 √(p(1−p)/n) ≤ 0.0036；0.02 是 5 个标准差以上的宽松界
        assert abs(counts[k] / n - p) < 0.02, (k, counts[k] / n, p)


def test_modifier_nouns_are_independent_of_subject_in_training_corpus(corpus):
    """训练语料里修饰语名词和主语单复数无关：没有“与最近的名词相反”之类的捷径。"""
    pairs = [(p.subject_plural, m.noun_plural) for p in map(tl.parse, corpus) for m in p.modifiers]
    differs = sum(a != b for a, b in pairs) / len(pairs)
    assert abs(differs - 0.5) < 0.02


def test_same_seed_same_corpus_different_seed_different_corpus():
    assert tl.generate_corpus(200, seed=5) == tl.generate_corpus(200, seed=5)
    assert tl.generate_corpus(200, seed=5) != tl.generate_corpus(200, seed=6)


def test_invalid_modifier_probs_are_rejected():
    with pytest.raises(ValueError):
        tl.generate_corpus(10, modifier_probs=(0.5, 0.4))


def test_parse_rejects_ungrammatical_sentences():
    with pytest.raises(ValueError, match="位置 3"):
        tl.parse("<s> the cat the sleeps </s>".split())
    with pytest.raises(ValueError):
        tl.parse("<s> the cat sees </s>".split())  # 及物动词缺宾语


def test_parse_reads_the_book_example():
    p = tl.parse("<s> the old girl near the houses near the angry trees sees the cat </s>".split())
    assert (p.subject_pos, p.subject_plural, p.verb_pos) == (3, False, 11)
    assert [m.kind for m in p.modifiers] == ["pp", "pp"]
    assert p.distractor_pos == (6, 10)


# ---------------------------------------------------------------------------
# 词表
# ---------------------------------------------------------------------------


def test_vocab_special_ids_and_roundtrip(corpus):
    assert VOCAB.tokens[:3] == ("<pad>", "<s>", "</s>")
    assert (VOCAB.pad_id, VOCAB.bos_id, VOCAB.eos_id) == (0, 1, 2)
    assert tl.build_vocab() == VOCAB  # 编号是确定的
    for s in corpus[:100]:
        assert VOCAB.decode(VOCAB.encode(s)) == s
    words = {w for s in corpus for w in s}
    assert words <= set(VOCAB.tokens)


def test_vocab_unknown_word_raises():
    with pytest.raises(KeyError, match="unicorn"):
        VOCAB.encode(["unicorn"])


# ---------------------------------------------------------------------------
# 真实概率：困惑度下限
# ---------------------------------------------------------------------------


def _all_sentences_without_modifiers():
    """枚举没有修饰语的全部句子。"""
    subjects = [["the"] + adj + [noun] for noun in itertools.chain(*tl.NOUNS)
                for adj in [[]] + [[a] for a in tl.ADJECTIVES]]
    for subj in subjects:
        plural = tl.noun_number(subj[-1])
        for pair in tl.TRANSITIVE_VERBS:
            for obj in itertools.chain(*tl.NOUNS):
                yield ["<s>"] + subj + [pair[plural], "the", obj, "</s>"]
        for pair in tl.INTRANSITIVE_VERBS:
            yield ["<s>"] + subj + [pair[plural], "</s>"]


def test_sentence_probabilities_sum_to_one():
    total = sum(math.exp(tl.sentence_log_prob(s, modifier_probs=(1.0,))) for s in _all_sentences_without_modifiers())
    assert total == pytest.approx(1.0, abs=1e-9)


def test_disagreeing_sentence_has_probability_zero():
    assert tl.sentence_log_prob("<s> the cat sleep </s>".split()) == -math.inf
    assert tl.sentence_log_prob("<s> the cat sleeps </s>".split()) > -math.inf


def test_language_perplexity_is_the_empirical_entropy(corpus):
    """下限 = exp(−平均对数概率)，与按 training.py 的约定（含 </s>，不含 <s>）数词元一致。"""
    floor = tl.language_perplexity(corpus[:1000])
    lp = sum(tl.sentence_log_prob(s) for s in corpus[:1000])
    assert floor == pytest.approx(math.exp(-lp / sum(len(s) - 1 for s in corpus[:1000])))
    assert 3.0 < floor < 6.0


# ---------------------------------------------------------------------------
# 主谓一致测试集
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 6, 8, 10])
def test_test_set_records_the_right_positions(k):
    items = tl.agreement_test_set(k, 300, seed=0)
    for it in items:
        toks = it.tokens
        assert it.n_modifiers == k == len(it.modifier_kinds)
        assert tl.noun_number(toks[it.subject_pos]) == it.subject_plural
        # 主语是句子里的第一个名词
        assert all(tl.noun_number(w) is None for w in toks[: it.subject_pos])
        assert toks[it.verb_pos] == it.correct_verb
        assert tl.verb_number(it.correct_verb) == it.subject_plural
        assert tl.verb_number(it.wrong_verb) == (not it.subject_plural)
        assert set(tl.verb_forms(it.correct_verb)) == {it.correct_verb, it.wrong_verb}
        # 默认 attractor_prob=1.0：修饰语里每个名词都是干扰名词
        assert len(it.distractor_pos) == k
        for pos in it.distractor_pos:
            assert it.subject_pos < pos < it.verb_pos
            assert tl.noun_number(toks[pos]) == (not it.subject_plural)
        assert it.prefix == toks[: it.verb_pos]
        assert it.verb_pos <= 4 + 4 * k  # 书：最长前缀（含 <s>）= 4 + 4k


def test_test_set_subjects_alternate_singular_plural():
    items = tl.agreement_test_set(2, 10, seed=0)
    assert [it.subject_plural for it in items] == [False, True] * 5


def test_test_sets_for_different_modifier_counts_are_unrelated():
    a, b = tl.agreement_test_set(1, 50, seed=0), tl.agreement_test_set(2, 50, seed=0)
    assert [it.tokens[:4] for it in a] != [it.tokens[:4] for it in b]
    assert tl.agreement_test_set(3, 50, seed=0) == tl.agreement_test_set(3, 50, seed=0)


def test_in_distribution_test_set_has_fewer_distractors():
    items = tl.agreement_test_set(2, 2000, seed=0, attractor_prob=0.5)
    share = sum(len(it.distractor_pos) for it in items) / (2 * len(items))
    assert abs(share - 0.5) < 0.05


def test_distance_grows_by_3_7_tokens_per_modifier():
    """书：每个修饰语平均 3.7 个词（关系从句 4 个；介词短语 3 个，40% 带形容词时 4 个）。"""
    assert mean_distance(tl.agreement_test_set(0, 100, seed=0)) == 0
    for k in (1, 4, 8):
        assert mean_distance(tl.agreement_test_set(k, 3000, seed=0)) / k == pytest.approx(3.7, abs=0.05)
    assert longest_prefix(tl.agreement_test_set(2, 1000, seed=0)) == 12


# ---------------------------------------------------------------------------
# 主谓一致指标：答案已知的假模型
# ---------------------------------------------------------------------------


def _verb_ids(plural: bool) -> list[int]:
    return [VOCAB.id(pair[int(plural)]) for pair in tl.TRANSITIVE_VERBS + tl.INTRANSITIVE_VERBS]


def _noun_number_table() -> torch.Tensor:
    """(V,)：复数名词 1，单数名词 0，其余 −1。"""
    table = torch.full((len(VOCAB),), -1)
    for pair in tl.NOUNS:
        table[VOCAB.id(pair[0])], table[VOCAB.id(pair[1])] = 0, 1
    return table


class AlwaysPlural(torch.nn.Module):
    """无论前缀是什么，都偏好动词的复数形式。"""

    def forward(self, idx, pad_mask=None):
        logits = torch.zeros(*idx.shape, len(VOCAB))
        logits[..., _verb_ids(True)] = 1.0
        return logits


class NounOracle(torch.nn.Module):
    """看第 ``which`` 个名词（0 = 第一个，即主语；−1 = 最后一个）的单复数，偏好与之一致的动词形式。"""

    def __init__(self, which: int) -> None:
        super().__init__()
        self.which = which

    def forward(self, idx, pad_mask=None):
        numbers = _noun_number_table()[idx]  # (B, T)
        is_noun = numbers >= 0
        if pad_mask is not None:
            is_noun &= pad_mask
        # 每个位置上“到目前为止”的第一个 / 最后一个名词的单复数
        pos = torch.arange(idx.size(1)).expand_as(idx)
        if self.which == 0:
            first = torch.where(is_noun, pos, idx.size(1)).min(dim=1, keepdim=True).values.clamp(max=idx.size(1) - 1)
            plural = numbers.gather(1, first).expand_as(idx)
        else:
            last = torch.where(is_noun, pos, -1).cummax(dim=1).values.clamp(min=0)
            plural = numbers.gather(1, last)
        logits = torch.zeros(*idx.shape, len(VOCAB))
        logits[..., _verb_ids(True)] = (plural == 1).float()[..., None]
        logits[..., _verb_ids(False)] = (plural == 0).float()[..., None]
        return logits


def test_always_plural_model_scores_the_share_of_plural_subjects():
    sentences = tl.generate_corpus(500, seed=3)
    items = [tl.agreement_item(s) for s in sentences]
    share_plural = sum(it.subject_plural for it in items) / len(items)
    assert 0.3 < share_plural < 0.7
    assert agreement_accuracy(AlwaysPlural(), items, VOCAB, batch_size=64) == pytest.approx(share_plural)
    assert agreement_accuracy(AlwaysPlural(), tl.agreement_test_set(3, 101, seed=0), VOCAB) == pytest.approx(50 / 101)


@pytest.mark.parametrize("k", [0, 1, 3, 8])
def test_subject_oracle_scores_100_percent(k):
    items = tl.agreement_test_set(k, 200, seed=1)
    assert agreement_accuracy(NounOracle(0), items, VOCAB, batch_size=37) == 1.0


def test_last_noun_heuristic_fails_every_item_with_modifiers():
    """默认的测试集里，“看最近的名词”的模型在有修饰语时全错：测试确实需要越过干扰名词。"""
    assert agreement_accuracy(NounOracle(-1), tl.agreement_test_set(0, 100, seed=0), VOCAB) == 1.0
    for k in (1, 2, 5):
        assert agreement_accuracy(NounOracle(-1), tl.agreement_test_set(k, 100, seed=0), VOCAB) == 0.0


def test_tie_counts_as_wrong_and_margins_have_the_right_sign():
    class Indifferent(torch.nn.Module):
        def forward(self, idx, pad_mask=None):
            return torch.zeros(*idx.shape, len(VOCAB))

    items = tl.agreement_test_set(2, 20, seed=0)
    assert agreement_accuracy(Indifferent(), items, VOCAB) == 0.0
    margins = verb_margins(AlwaysPlural(), items, VOCAB)
    assert torch.equal(margins, torch.tensor([-1.0, 1.0] * 10))


def test_agreement_table_columns():
    rows = agreement_table(NounOracle(0), VOCAB, (0, 2, 4), n=100, seed=0)
    assert [r.n_modifiers for r in rows] == [0, 2, 4]
    assert all(r.accuracy == 1.0 and r.n_items == 100 for r in rows)
    assert [r.longest_prefix for r in rows] == [4, 12, 20]


def test_metric_restores_training_mode():
    model = AlwaysPlural().train()
    agreement_accuracy(model, tl.agreement_test_set(1, 10, seed=0), VOCAB)
    assert model.training


# ---------------------------------------------------------------------------
# 注意力分析：注意力已知的假模型
# ---------------------------------------------------------------------------


class UniformAttention(AlwaysPlural):
    """2 层 × 3 个头，每个位置对它能看到的真实词元平均分配注意力。"""

    def forward_with_attention(self, idx, pad_mask=None):
        b, t = idx.shape
        visible = torch.ones(t, t).tril().bool().expand(b, t, t)  # (B, T, T)
        if pad_mask is not None:
            visible = visible & pad_mask[:, None, :]
        w = visible.float() / visible.float().sum(-1, keepdim=True).clamp(min=1)  # (B, T, T)
        return self(idx, pad_mask), w[None, :, None].expand(2, b, 3, t, t)  # (L, B, h, T, T)


class SubjectAttention(AlwaysPlural):
    """1 层 × 2 个头：头 0 把全部注意力放在第一个名词上，头 1 放在 <s> 上。"""

    def forward_with_attention(self, idx, pad_mask=None):
        b, t = idx.shape
        first = (_noun_number_table()[idx] >= 0).float().argmax(1)  # (B,)
        w = torch.zeros(1, b, 2, t, t)
        w[0, torch.arange(b), 0, :, first] = 1.0
        w[0, :, 1, :, 0] = 1.0
        return self(idx, pad_mask), w


def test_uniform_attention_gives_the_uniform_weight_to_subject_and_distractors():
    items = tl.agreement_test_set(2, 200, seed=0)
    s = attention_to_subject(UniformAttention(), items, VOCAB, batch_size=64)
    assert s.subject.shape == s.distractor.shape == (2, 3)
    assert torch.allclose(s.subject, torch.full((2, 3), s.uniform))
    assert torch.allclose(s.distractor, torch.full((2, 3), s.uniform))
    assert (s.n_items, s.n_distractors) == (200, 400)
    assert 1 / 12 < s.uniform < 1 / 8  # 书：2 个修饰语时，均匀分配每个位置约 0.09


def test_subject_head_is_found():
    s = attention_to_subject(SubjectAttention(), tl.agreement_test_set(3, 50, seed=0), VOCAB)
    assert torch.equal(s.subject, torch.tensor([[1.0, 0.0]]))
    assert torch.equal(s.distractor, torch.tensor([[0.0, 0.0]]))


def test_model_without_attention_weights_gets_a_clear_error():
    with pytest.raises(TypeError, match="attention_fn"):
        attention_to_subject(AlwaysPlural(), tl.agreement_test_set(1, 5, seed=0), VOCAB)


def test_generated_sentences_are_pinned():
    """语料和测试集只由种子决定（字符串种子用 SHA-512，与 PYTHONHASHSEED 无关）；改了语法就得改这里和书。"""
    assert tl.generate_corpus(1, seed=0)[0] == (
        "<s> the cat that helps the teacher near the cats that helps the houses laughs </s>".split())
    assert tl.agreement_test_set(1, 1, seed=0)[0].tokens == tuple(
        "<s> the young cat that sees the trees sleeps </s>".split())
