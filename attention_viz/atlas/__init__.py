"""The head atlas: what every head does across a corpus (Clark et al. 2019 statistics and syntactic
accuracy, AttentionViz's joint query–key view, exBERT's similar contexts), computed on Ray Data.

sources.py  corpus files and the built-in probes → records     probes.py   templates with gold relations
pipeline.py the Ray pass (driver)                              worker.py   the model actor
finish.py   sample, indexes, summary after the pass            store.py    reading an atlas directory
stats.py    per-sentence head statistics (numpy)                embedding.py joint Q–K 2-D maps (cached)
neighbors.py faiss similar-context search                      cli.py      `atlas build` / `atlas show`
"""
