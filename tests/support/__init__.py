"""What only the tests use: the kubectl and ``kubernetes`` client wrappers, waits, HTTP/2 and
plain-HTTP test clients, an ASGI driver, policies and oversized samples. The stand-ins and process
harnesses the demo and the benchmarks share with the tests are the ``devkit`` package."""
