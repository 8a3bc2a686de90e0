"""实践 P08 的笔记本页面（docs/chapter20/p08-practice.ipynb）：只读 JSON，不执行。

笔记本由书的完整构建执行（tests/test_book_build.py 里的全新构建），这里检查的是“读者拿到的文件”本身：
保存时不带输出、是纯 Python（构建引擎不认 IPython 的魔法命令）、固定了种子与线程、调用的是库里的训练函数，
并且用 record() 标出了正文要求核对的数；它的记录文件里有这些数，且与第 20 章训练片段的记录一致。
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "chapter20" / "p08-practice.ipynb"
RECORD = ROOT / "snippets" / "chapter20" / "p08-practice.record.json"
CHAPTER_RECORD = ROOT / "snippets" / "chapter20" / "p08_train.record.json"

# 笔记本必须记录的数：参数个数、词表大小、训练前后的验证损失、泄漏测试与拆头合并的最大差……
REQUIRED_RECORDS = {
    "vocab_size",
    "n_parameters",
    "val_loss_initial",
    "val_loss_final",
    "train_loss_final",
    "future_attention_weight",
    "leak_earlier_max_diff",
    "leak_later_min_diff",
    "leak_earlier_max_diff_trained",
    "split_merge_max_diff",
    "mha_rebuilt_max_diff",
}
# 与第 20 章的训练片段（snippets/chapter20/p08_train.py）同名、应当相等的数：同一个配方、同一份数据
SHARED_WITH_CHAPTER = ["vocab_size", "train_chars", "val_chars", "n_parameters", "uniform_loss", "unigram_loss",
                       "val_loss_initial", "val_loss_final", "train_loss_final"]


@pytest.fixture(scope="module")
def nb() -> dict:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def code_cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def recorded_names(nb: dict) -> list[str]:
    """每个代码格里 record("名字", …) 的名字（按出现顺序）。"""
    names = []
    for source in code_cells(nb):
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "record"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                names.append(node.args[0].value)
    return names


def test_the_notebook_is_nbformat_4_with_a_python_3_kernel_and_cell_ids(nb):
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 5
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    ids = [c.get("id") for c in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), "每个格子都要有唯一的 id"


def test_the_notebook_is_saved_without_outputs(nb):
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"第 {i} 格保存了输出：输出由构建加上"
            assert cell["execution_count"] is None, f"第 {i} 格保存了执行计数"


def test_every_code_cell_is_plain_python_without_ipython_magics(nb):
    for source in code_cells(nb):
        ast.parse(source)  # 魔法命令（%、!）不是合法的 Python，这里就会失败
        for line in source.splitlines():
            assert not re.match(r"\s*[%!]", line), f"IPython 魔法命令：{line}"
        assert "get_ipython" not in source


def test_the_first_code_cell_fixes_the_seeds_and_uses_one_thread(nb):
    first = code_cells(nb)[0]
    for call in ("random.seed(0)", "np.random.seed(0)", "torch.manual_seed(0)", "torch.set_num_threads(1)"):
        assert call in first, f"第一个代码格缺少 {call}"


def test_the_notebook_trains_with_the_library_recipe_and_draws_with_new_figure(nb):
    source = "\n".join(code_cells(nb))
    assert "p08.train_p08(config, data" in source and "config = p08.P08Config()" in source
    assert "optimizer" not in source and ".backward()" not in source, "不要抄一份训练循环：调用 p08.train_p08"
    assert "new_figure(" in source
    assert "CORPUS_FILES = p08.CORPUS_FILES" in source, "语料随包安装：从包里读，在哪个目录打开笔记本都能运行"


def test_the_notebook_records_the_numbers_it_shows(nb):
    names = recorded_names(nb)
    assert len(names) == len(set(names)), "同一个名字 record 了两次"
    assert REQUIRED_RECORDS <= set(names), f"缺少记录：{sorted(REQUIRED_RECORDS - set(names))}"


def test_the_record_file_holds_every_recorded_number_with_the_expected_values(nb):
    results = json.loads(RECORD.read_text(encoding="utf-8"))["results"]
    assert set(recorded_names(nb)) <= set(results), "记录文件与笔记本不一致：请重新构建或 accept"
    value = lambda name: results[name]["value"]  # noqa: E731
    for name in ("future_attention_weight", "leak_earlier_max_diff", "leak_earlier_max_diff_trained",
                 "split_merge_max_diff"):
        assert value(name) == 0.0, name
    assert value("mha_rebuilt_max_diff") < 1e-6
    assert value("leak_later_min_diff") > 1e-5
    assert value("val_loss_final") < value("unigram_loss") < value("val_loss_initial")


def test_the_notebook_numbers_equal_the_chapter_training_snippet():
    ours = json.loads(RECORD.read_text(encoding="utf-8"))["results"]
    chapter = json.loads(CHAPTER_RECORD.read_text(encoding="utf-8"))["results"]
    for name in SHARED_WITH_CHAPTER:
        assert ours[name]["value"] == pytest.approx(chapter[name]["value"], rel=1e-9, abs=1e-12), name


def test_the_page_is_in_the_nav_and_every_link_points_at_the_notebook():
    assert "      - chapter20/p08-practice.ipynb\n" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert not (ROOT / "docs" / "chapter20" / "p08-practice.md").exists()
    for page in (ROOT / "docs").rglob("*.md"):
        assert "p08-practice.md" not in page.read_text(encoding="utf-8"), f"{page} 仍链接到 p08-practice.md"
