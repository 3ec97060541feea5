"""Document-side stores written at encoding time and read by re-rankers: dense vectors (faiss),
SparseEmbed term embeddings, token embeddings and SSR codes, TILDE likelihoods. Every writer stands
on `base.StoreWriter`: a store is built aside and renamed into place, so it is complete or absent."""
