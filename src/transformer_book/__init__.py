"""Transformer 读本的配套代码。

这个包有两半，互不依赖：

- 模型与实验：``attention_numpy``（第 2–3 节的 numpy 自注意力）、``transformer``（参考实现）等；
- 书的构建引擎：``transformer_book.book``（MkDocs 插件，把代码片段的结果放进页面）。

为了让每个片段的缓存只依赖它真正导入的模块，这里刻意不导入任何子模块。
"""

__all__: list[str] = []
