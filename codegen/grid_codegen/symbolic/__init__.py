"""The expression layer behind the straight-line (thread-per-item) code: scalar graphs
with folding and common subexpressions (`graph`), forward-mode derivatives at trace time
(`dual`), spatial algebra written once over any scalar (`spatial`), the algorithms traced
on it (`algorithms`), and C++ emission of a traced pass (`emit`)."""
