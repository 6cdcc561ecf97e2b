"""How a process serves: its settings (offline, threads, heap), the access rules for what a link may
load or write (model roots, atlas root), the bounded cache of loaded models, and recycled memory."""
