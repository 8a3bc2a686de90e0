"""第 11.3 节四个位置编码片段（``s11_positions_*.py``）共用的一段：训练一种位置编码的全部模型。

每种位置编码训练 3 个种子（``POSITION_SEEDS``）：单个训练在更长句子上的结果，会因为浮点运算顺序这样的
小差别而翻转，只有几个种子放在一起才看得出规律。每个模型交给 ``s11_length``（打包好的模型），
测试集困惑度记在这里。以下划线开头的文件不是片段，是片段导入的普通模块。
"""

from transformer_book.book import Artifact, Value
from transformer_book.lecture07.experiments import position_models


def position_results(scheme, reuse=None):
    models = position_models(scheme, reuse=reuse)  # 种子 → 打包好的模型（附测试集困惑度）
    results = {}
    for seed, packed in models.items():
        results[f"model_seed{seed}"] = Artifact(packed)
        results[f"test_perplexity_seed{seed}"] = Value(packed["test_perplexity"], ".3f", kind="trained")
    return results
