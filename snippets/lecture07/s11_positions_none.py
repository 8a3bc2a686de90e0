"""第 11.3 节：位置编码用不加任何位置信息（只有因果掩码）的迷你 GPT，两个随机种子。

数据、模型的其余部分和训练设置都与第 11.1 节的迷你 GPT 相同，只换位置编码；主谓一致的评估在 s11_length 里。
"""

from transformer_book.book import Artifact, Value
from transformer_book.experiments import load_toy_data, package, position_specs, train

SCHEME = "none"
BUDGET_SECONDS = 120



def compute():
    data = load_toy_data()
    results = {}
    for spec in position_specs(SCHEME):
        trained = train(spec, data)
        results[f"model_seed{spec.seed}"] = Artifact(package(spec, trained, len(data.vocab)))
        results[f"test_perplexity_seed{spec.seed}"] = Value(trained.test_perplexity, ".3f", kind="trained")
    return results
