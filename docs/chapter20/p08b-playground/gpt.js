// 从零写的 GPT（第 20 章“从零写一个会写诗的 GPT”的第五步，scratch.BlockLM）在浏览器里的前向计算与续写。
//
// 纯 JavaScript，不用任何库，不连网。按数据流的顺序一部分一个函数，可以对着
// src/transformer_book/chapter20/scratch.py 一行一行地读：嵌入 → 块（层归一化、多头注意力、残差、
// 层归一化、前馈网络、残差）→ 最后的层归一化 → 输出层。
//
// 张量都是一维的 Float64Array，按行存放：形状 (T, d) 的矩阵，第 t 行第 j 列在 [t * d + j]。
// 权重沿用 PyTorch 的形状：线性层存的 weight（下面写作 W）是 (输出维数, 输入维数)，算的是 x Wᵀ + b；
// 这个 W 是书里公式中那个矩阵的转置（书里写 xW^Q，这里存的是 (W^Q)ᵀ）。
//
// 每次构建都在 V8 里运行这个文件，对着 PyTorch 核对 logits 和每个注意力权重
// （transformer_book/chapter20/playground.py；PyTorch 那边用的是权重同样舍入到 float16 的同一个模型）：
// 差过 1e-4，构建就失败。
(function (root) {
  "use strict";

  var FORMAT = "transformer-book-gpt/1";

  // ---- 读入模型文件（格式见 playground.py 的 export）--------------------------------------------------

  var HALF = (function () {  // float16 的 65536 个位模式 → 它的值，先算成一张表
    var table = new Float64Array(65536);
    for (var h = 0; h < 65536; h++) {
      var sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
      if (exp === 0) table[h] = sign * frac * Math.pow(2, -24);  // 非规格化数
      else if (exp === 31) table[h] = frac ? NaN : sign * Infinity;
      else table[h] = sign * (1 + frac / 1024) * Math.pow(2, exp - 15);
    }
    return table;
  })();

  function utf8(bytes) {  // 文件头是 UTF-8（词表里是汉字）；V8 本身没有 TextDecoder，这里自己解
    var out = "", i = 0;
    while (i < bytes.length) {
      var b = bytes[i++], cp;
      if (b < 0x80) cp = b;
      else if (b < 0xe0) cp = ((b & 0x1f) << 6) | (bytes[i++] & 0x3f);
      else if (b < 0xf0) cp = ((b & 0x0f) << 12) | ((bytes[i++] & 0x3f) << 6) | (bytes[i++] & 0x3f);
      else cp = ((b & 0x07) << 18) | ((bytes[i++] & 0x3f) << 12) | ((bytes[i++] & 0x3f) << 6) | (bytes[i++] & 0x3f);
      out += String.fromCodePoint(cp);
    }
    return out;
  }

  function load(buffer) {
    var view = new DataView(buffer), n = view.getUint32(0, true);
    var header = JSON.parse(utf8(new Uint8Array(buffer, 4, n)));
    if (header.format !== FORMAT) throw new Error("不认识的模型文件：" + header.format);
    var offset = 4 + n, t = {};
    header.tensors.forEach(function (entry) {
      var size = entry[1].reduce(function (a, b) { return a * b; }, 1), data = new Float64Array(size);
      for (var i = 0; i < size; i++) data[i] = HALF[view.getUint16(offset + 2 * i, true)];
      offset += 2 * size;
      t[entry[0]] = data;
    });
    var index = {};  // 字 → 编号（不含 <pad>、<unk> 这两个特殊词元）
    header.vocab.forEach(function (ch, i) { if (i >= header.config.specials) index[ch] = i; });
    return {config: header.config, vocab: header.vocab, index: index, t: t, colors: header.colors || [],
            page: header.page || {}};
  }

  // ---- 基本运算 ------------------------------------------------------------------------------------

  // x (T, n) → x Wᵀ + b (T, m)；W 是 (m, n)，b 是 (m) 或 null（查询、键、值的投影没有偏置）
  function linear(x, T, n, W, b, m) {
    var y = new Float64Array(T * m);
    for (var t = 0; t < T; t++) {
      for (var i = 0; i < m; i++) {
        var s = b ? b[i] : 0;
        for (var j = 0; j < n; j++) s += x[t * n + j] * W[i * n + j];
        y[t * m + i] = s;
      }
    }
    return y;
  }

  // 层归一化：每个位置的 d 个数减去均值、除以 √(方差 + ε)（方差除以 d，不是 d − 1；ε = 1e-5），再乘 γ、加 β
  function layerNorm(x, T, d, gamma, beta) {
    var y = new Float64Array(T * d);
    for (var t = 0; t < T; t++) {
      var mean = 0, v = 0;
      for (var j = 0; j < d; j++) mean += x[t * d + j];
      mean /= d;
      for (j = 0; j < d; j++) v += (x[t * d + j] - mean) * (x[t * d + j] - mean);
      var inv = 1 / Math.sqrt(v / d + 1e-5);
      for (j = 0; j < d; j++) y[t * d + j] = (x[t * d + j] - mean) * inv * gamma[j] + beta[j];
    }
    return y;
  }

  // 误差函数（Abramowitz 与 Stegun 7.1.26，绝对误差不超过 1.5e-7：对 1e-4 的核对绰绰有余）
  function erf(x) {
    var s = x < 0 ? -1 : 1, a = Math.abs(x), k = 1 / (1 + 0.3275911 * a);
    var poly = ((((1.061405429 * k - 1.453152027) * k + 1.421413741) * k - 0.284496736) * k + 0.254829592) * k;
    return s * (1 - poly * Math.exp(-a * a));
  }

  // GELU（PyTorch nn.GELU() 默认的 erf 形式，不是 tanh 近似）：x · Φ(x) = x / 2 · (1 + erf(x / √2))；
  // erf 用上面的近似公式算
  function gelu(x) {
    return 0.5 * x * (1 + erf(x / Math.SQRT2));
  }

  // ---- 模型的各部分，按数据流的顺序 ---------------------------------------------------------------

  // 嵌入：第 t 个字的向量加上位置 t 的向量 → (T, d)
  function embed(m, ids) {
    var d = m.config.d_model, T = ids.length, x = new Float64Array(T * d);
    var tok = m.t["tok_emb.weight"], pos = m.t["pos_emb.weight"];
    for (var t = 0; t < T; t++) {
      for (var j = 0; j < d; j++) x[t * d + j] = tok[ids[t] * d + j] + pos[t * d + j];
    }
    return x;
  }

  // 一个头：查询、键、值各投影到 d_h 维；分数 q·k / √d_h，只看自己和前文（因果掩码），softmax 成权重，
  // 再用权重对值加权平均。返回输出 (T, d_h) 和权重 (T, T)（掩掉的格子是 0）。
  function head(m, i, h, T) {
    var d = m.config.d_model, dh = d / m.config.n_heads, p = "block.attn.heads." + i + ".";
    var q = linear(h, T, d, m.t[p + "query.weight"], null, dh);
    var k = linear(h, T, d, m.t[p + "key.weight"], null, dh);
    var v = linear(h, T, d, m.t[p + "value.weight"], null, dh);
    var w = new Float64Array(T * T), out = new Float64Array(T * dh), scale = Math.sqrt(dh);
    for (var t = 0; t < T; t++) {
      var max = -Infinity, sum = 0, s, j;
      for (s = 0; s <= t; s++) {  // 只算 s ≤ t：s > t 是后文，权重留作 0（PyTorch 把分数记为 −∞，softmax 之后也恰好是 0）
        var dot = 0;
        for (j = 0; j < dh; j++) dot += q[t * dh + j] * k[s * dh + j];
        w[t * T + s] = dot / scale;
        if (w[t * T + s] > max) max = w[t * T + s];
      }
      for (s = 0; s <= t; s++) { w[t * T + s] = Math.exp(w[t * T + s] - max); sum += w[t * T + s]; }
      for (s = 0; s <= t; s++) {
        w[t * T + s] /= sum;
        for (j = 0; j < dh; j++) out[t * dh + j] += w[t * T + s] * v[s * dh + j];
      }
    }
    return {out: out, weights: w};
  }

  // 多头注意力：h 个头各读整个输入；输出并排拼成 (T, d)，再经 W^O 混合
  function multiHead(m, h, T) {
    var d = m.config.d_model, n = m.config.n_heads, dh = d / n, cat = new Float64Array(T * d), weights = [];
    for (var i = 0; i < n; i++) {
      var r = head(m, i, h, T);
      weights.push(r.weights);
      for (var t = 0; t < T; t++) {
        for (var j = 0; j < dh; j++) cat[t * d + i * dh + j] = r.out[t * dh + j];
      }
    }
    return {out: linear(cat, T, d, m.t["block.attn.proj.weight"], m.t["block.attn.proj.bias"], d), weights: weights};
  }

  // 前馈网络：d → 4d → GELU → d，每个位置各算各的
  function feedForward(m, h, T) {
    var d = m.config.d_model, p = "block.ffn.net.";
    var a = linear(h, T, d, m.t[p + "0.weight"], m.t[p + "0.bias"], 4 * d);
    for (var i = 0; i < a.length; i++) a[i] = gelu(a[i]);
    return linear(a, T, 4 * d, m.t[p + "2.weight"], m.t[p + "2.bias"], d);
  }

  // 一个 Pre-LN 的块：x + MHA(LN(x))，再 x + FFN(LN(x))
  function block(m, x, T) {
    var d = m.config.d_model;
    var attn = multiHead(m, layerNorm(x, T, d, m.t["block.ln1.weight"], m.t["block.ln1.bias"]), T);
    var y = new Float64Array(x.length);
    for (var i = 0; i < x.length; i++) y[i] = x[i] + attn.out[i];
    var ffn = feedForward(m, layerNorm(y, T, d, m.t["block.ln2.weight"], m.t["block.ln2.bias"]), T);
    for (i = 0; i < y.length; i++) y[i] += ffn[i];
    return {x: y, weights: attn.weights};
  }

  // 整个模型：ids（至多 context 个编号）→ logits 和每个头的注意力权重。
  // all 为真时给出每个位置的 logits (T, V)（构建时的核对用），否则只给最后一个位置的 (V)（页面只要它）。
  function forward(m, ids, all) {
    var d = m.config.d_model, V = m.config.vocab_size, T = ids.length;
    if (T < 1 || T > m.config.context) throw new Error("输入要有 1 到 " + m.config.context + " 个字，收到 " + T + " 个");
    var b = block(m, embed(m, ids), T);
    var x = layerNorm(b.x, T, d, m.t["ln_f.weight"], m.t["ln_f.bias"]);
    var rows = all ? T : 1, last = all ? x : x.subarray((T - 1) * d);
    return {logits: linear(last, rows, d, m.t["lm_head.weight"], m.t["lm_head.bias"], V), attention: b.weights};
  }

  // ---- 读者打的字 → 编号 ---------------------------------------------------------------------------

  // 开头加一个换行（训练文本里每首诗都从换行之后开始）；词表里没有的字去掉并列出；
  // 超过上下文窗口时只留最后 context 个编号（开头的换行最先被截掉；cut 是截掉了几个，换行也算在内）。
  function prepare(m, text) {
    var chars = Array.from(text), ids = [m.index["\n"]], missing = [];
    chars.forEach(function (ch) {
      if (ch in m.index) ids.push(m.index[ch]);
      else if (missing.indexOf(ch) < 0) missing.push(ch);
    });
    var cut = Math.max(0, ids.length - m.config.context);
    return {ids: ids.slice(cut), missing: missing, cut: cut};
  }

  // ---- 抽样 ----------------------------------------------------------------------------------------

  // Mulberry32：一个 32 位的伪随机数发生器；同一个种子，每次给出同一串 [0, 1) 中的数（Python 版逐位相同）
  function mulberry32(seed) {
    var state = seed >>> 0;
    return function () {
      state = (state + 0x6d2b79f5) >>> 0;
      var t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // 最后一个位置的 logits → 概率（去掉特殊词元，除以温度，softmax）
  function probabilities(m, logits, temperature) {
    var V = logits.length, p = new Float64Array(V), max = -Infinity, sum = 0, i;
    for (i = m.config.specials; i < V; i++) if (logits[i] / temperature > max) max = logits[i] / temperature;
    for (i = m.config.specials; i < V; i++) { p[i] = Math.exp(logits[i] / temperature - max); sum += p[i]; }
    for (i = 0; i < V; i++) p[i] /= sum;
    return p;
  }

  // 按概率从大到小排好的编号（一样大的，编号小的在前）
  function ranked(p) {
    var order = [];
    for (var i = 0; i < p.length; i++) order.push(i);
    return order.sort(function (a, b) { return p[b] - p[a] || a - b; });
  }

  // 抽一个字，与书中 transformer.next_token_distribution 的顺序相同：留前 topK 个（0 = 全留），在它们里面重新
  // 归一化；再按概率从大到小留下最短的一段，使累计概率刚到 topP（排第一的总会留下）；把留下的归一化，用 u 选出一个
  function choose(m, logits, u, temperature, topK, topP) {
    var p = probabilities(m, logits, temperature), order = ranked(p), kept = [], mass = 0, cum = 0, total = 0, acc = 0, i;
    if (topK > 0) order = order.slice(0, topK);
    order = order.filter(function (j) { return p[j] > 0; });  // 概率为 0 的（特殊词元）不留
    for (i = 0; i < order.length; i++) mass += p[order[i]];
    for (i = 0; i < order.length && (i === 0 || cum < topP); i++) {
      kept.push(order[i]);
      cum += p[order[i]] / mass;
    }
    for (i = 0; i < kept.length; i++) total += p[kept[i]];
    for (i = 0; i < kept.length; i++) {
      acc += p[kept[i]] / total;
      if (u < acc) return kept[i];
    }
    return kept[kept.length - 1];
  }

  // 续写：一次一个字，写到换行（换行不写进结果）或 max_chars 个字为止。
  // options：temperature（> 0）、top_k（0 = 不限）、top_p（1 = 不限）、seed、max_chars，都要给出。
  function generate(m, text, options) {
    var o = options, rand = mulberry32(o.seed), ids = prepare(m, text).ids, out = [], newline = m.index["\n"];
    for (var n = 0; n < o.max_chars; n++) {
      var next = choose(m, forward(m, ids.slice(-m.config.context), false).logits, rand(), o.temperature, o.top_k, o.top_p);
      if (next === newline) break;
      out.push(m.vocab[next]);
      ids.push(next);
    }
    return {text: out.join("")};
  }

  root.BookGPT = {load: load, forward: forward, prepare: prepare, probabilities: probabilities, ranked: ranked,
                  generate: generate};
})(typeof window !== "undefined" ? window : globalThis);
