"""What cannot exist on a development machine, made to behave like the real thing: a simulated
cloud (the `fake` provider the demo runs on), an HTTP fake of each provider's API (each runs
in its own process with `python -m governor.fakes.<provider>`), and a scripted NVML driver
under the real nvidia-ml-py bindings. Used by the tests, the demo and the benchmarks alike;
the server reaches them only through the composition root."""
