"""What tests of several folders share: free ports without bind races (ports.py), waiting for a
condition (eventually.py), the in-memory store for fake-time tests (memory_store.py), servers in
the test's loop (servers.py, inprocess_service.py), real broker and controller processes
(broker_process.py, controller_process.py), a raw wire-protocol client (wire_client.py), and
the real kubectl (kubectl.py), and addresses that never answer (blackholes.py).

``tests`` is on pytest's pythonpath: import these as ``support.<module>``.
"""
