"""Online retrieval: every retriever behind one interface; ``registry`` names them and runs them."""
