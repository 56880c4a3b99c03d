"""stado's use of an object store, beside its interface (stado.objectstore): the conditional writes of stado's
documents (cas), whether a write whose answer was lost landed (landing), the store's clock (storeclock), large
objects moved without a clock ending them (transfer), and whether a store keeps the promises exactly-once rests on
(guarantees).
"""
