"""The model families, one package each (config, model, encoder, training, re-ranker), and what they
share: the registry they register into, the configs resolver, the shared settings, the interfaces and
the losses. docs/architecture.md walks through adding one."""
