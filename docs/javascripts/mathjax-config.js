// MathJax 3 configuration. MathJax itself ships with the site (assets/mathjax/tex-svg-full.js, copied by
// the book plugin): no CDN.
window.MathJax = {
  tex: {
    // \( \) and \[ \] come from pymdownx.arithmatex; $ and $$ from notebook pages (mkdocs-jupyter).
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    // Typeset only arithmatex spans and notebook Markdown cells. ".+" (not ".*|") so that class-less
    // paragraphs inside a notebook cell inherit "process" from the cell instead of being ignored.
    ignoreHtmlClass: ".+",
    processHtmlClass: "arithmatex|jp-RenderedMarkdown"
  },
  // \text{…} in the surrounding font: the Chinese labels of a formula (上下括号下的说明) drawn with the
  // book's web font, not with MathJax's own fonts, which hold no Chinese characters.
  svg: { mtextInheritFont: true },
  loader: { load: [] },
  startup: { typeset: true }
};
