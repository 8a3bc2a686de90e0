// MathJax 3 configuration for pymdownx.arithmatex (generic mode). MathJax itself ships with the site
// (assets/mathjax/tex-svg-full.js, copied by the book plugin): no CDN.
window.MathJax = {
  tex: {
    // \( \) and \[ \] come from pymdownx.arithmatex; $ and $$ from notebook pages (mkdocs-jupyter).
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|jp-RenderedMarkdown"
  },
  loader: { load: [] },
  startup: { typeset: true }
};

// Material's instant navigation replaces the page without reloading scripts: typeset again.
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) {
      MathJax.startup.output.clearCache();
      MathJax.typesetClear();
      MathJax.texReset();
      MathJax.typesetPromise();
    }
  });
}
