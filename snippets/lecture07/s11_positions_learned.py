"""第 11.3 节：位置编码用可学习的位置嵌入的迷你 GPT，两个随机种子。

种子 0 的模型就是第 11.1 节训练的迷你 GPT（同样的数据、设置和种子），直接取来，不再重训；这里只训练种子 1。
"""

from transformer_book.book import Artifact, Value, artifact
from transformer_book.experiments import GPT_SPEC, ModelSpec, load_toy_data, package, position_specs, train

SCHEME = "learned"
REQUIRES = ["lecture07/s11_train"]
BUDGET_SECONDS = 60



def compute():
    data = load_toy_data()
    results = {}
    for spec in position_specs(SCHEME):
        if spec == GPT_SPEC:  # 第 11.1 节的模型
            packed = artifact("lecture07/s11_train", "gpt")
            assert ModelSpec(**packed["spec"]) == spec
        else:
            packed = package(spec, train(spec, data), len(data.vocab))
        results[f"model_seed{spec.seed}"] = Artifact(packed)
        results[f"test_perplexity_seed{spec.seed}"] = Value(packed["test_perplexity"], ".3f", kind="trained")
    return results
