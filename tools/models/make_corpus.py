#!/usr/bin/env python3
"""Generates a small English-like text corpus as a byte-level token stream.

Sentences come from a seeded grammar (subjects, verbs, objects, places,
times, a few fixed phrases), so the text has real structure for a language
model to learn: spelling, word order, agreement, punctuation. Tokens are the
UTF-8 bytes (vocabulary 256), written as little-endian uint16 for
`cleave-run --tokens FILE --token-dtype uint16`.

    make_corpus.py -o corpus.bin [--bytes 1000000] [--seed 0] [--text corpus.txt]
"""

import argparse
import random

import numpy as np

SUBJECTS = ["the cat", "the dog", "a small bird", "my neighbour", "the old man", "the teacher",
            "a young girl", "the farmer", "our captain", "the baker", "a quiet student", "the king"]
VERBS = ["sees", "finds", "carries", "paints", "remembers", "follows", "builds", "reads",
         "writes about", "waits for", "talks to", "looks at"]
OBJECTS = ["a red apple", "the river", "an old book", "the green door", "a letter", "the garden",
           "a wooden boat", "the mountain", "a bright star", "the market", "a long road", "the sea"]
PLACES = ["in the morning", "near the village", "after the rain", "before dinner", "under the bridge",
          "at the station", "on a cold day", "by the window", "in the evening", "every summer"]
ENDINGS = [".", ".", ".", "!", "?"]
PHRASES = ["once upon a time", "and then", "but later", "so in the end", "as always"]


def sentence(rng):
    words = []
    if rng.random() < 0.25:
        words.append(rng.choice(PHRASES))
    words += [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
    if rng.random() < 0.6:
        words.append(rng.choice(PLACES))
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(ENDINGS)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, help="token file (.bin, uint16)")
    p.add_argument("--bytes", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--text", help="also write the text here")
    a = p.parse_args()
    rng = random.Random(a.seed)
    parts, size = [], 0
    while size < a.bytes:
        s = sentence(rng) + (" " if rng.random() < 0.8 else "\n")
        parts.append(s)
        size += len(s)
    text = "".join(parts)[: a.bytes]
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype("<u2")
    data.tofile(a.output)
    if a.text:
        with open(a.text, "w") as f:
            f.write(text)
    print("wrote %s: %d tokens (bytes of generated English-like text)" % (a.output, data.size))


if __name__ == "__main__":
    main()
