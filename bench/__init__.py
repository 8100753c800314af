"""StateGym's benchmarks: `python -m bench NAME [args]`, `python -m bench --list`, `make bench`;
the index of what each measures and its latest figure is bench/README.md."""
