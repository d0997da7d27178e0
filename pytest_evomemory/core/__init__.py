"""The vocabulary every layer speaks: the errors that reach the user, the value
objects that flow between streams, agents, memory and evaluators, tools, the one
registry shape, and the bounded, validated reading of every input.

Imports only :mod:`pytest_evomemory.util` and :mod:`pytest_evomemory.rundocs`.
"""
