"""The paper detector: title, result tables (targets) and claims from a PDF, LaTeX or Markdown
paper."""
