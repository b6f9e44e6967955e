"""The sealed `requestState`: the fleet's key ring, its codec, the plaintext layout, and single use."""
