"""
The first part of the lecture's notebook, top to bottom: the data, the tokens, the batches and
the bigram model, before any attention. Each step prints what the lecture shows; every claim it
makes is checked, and the script exits non-zero if one fails. About 6 s on a 2-core CPU.

    python scripts/data_walkthrough.py
    python scripts/attention_walkthrough.py     # the notebook's second part: the attention trick
"""
import math

import torch
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import gpt  # noqa: E402
import bigram  # noqa: E402 (common puts the project's folder first on the path)
from attention_walkthrough import check, run_checked, section  # noqa: E402 (the second part)


def main():
    section("1. the data: about a million characters of Shakespeare")
    text = gpt.read_text()
    print(f"length of the text in characters: {len(text):,}\nits first 200:\n{text[:200]}")
    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    print(f"the vocabulary, every character that occurs, sorted: {''.join(chars)!r}")
    check(f"65 characters, the first two a newline and a space (here {vocab_size})",
          vocab_size == 65 and chars[:2] == ['\n', ' '])

    section("2. tokens: each character becomes an integer, and back")
    encode, decode = common.codec(chars)
    print(f"encode('hii there') = {encode('hii there')}\ndecode(that) = {decode(encode('hii there'))!r}")
    check("decode(encode(s)) gives s back", decode(encode(text[:1000])) == text[:1000])
    check("'h' is 46 and 'e' is 43, as in the lecture", encode('he') == [46, 43])
    print("  a tiny vocabulary makes long sequences: GPT-2's tokenizer (tiktoken) has 50,257 tokens\n"
          "  of several characters each, so the same text takes far fewer of them")

    section("3. the whole text as one tensor of integers")
    data = torch.tensor(encode(text), dtype=torch.long)
    print(f"data: {tuple(data.shape)}, {data.dtype}\ndata[:20] = {data[:20].tolist()}")
    check("one integer per character", len(data) == len(text))

    section("4. train and val: the first 90% and the rest")
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    print(f"train: {len(train_data):,} characters, val: {len(val_data):,}")
    check("the split is gpt.py's (common.split)", all(torch.equal(a, b) for a, b in
                                                  zip((train_data, val_data), common.split(data))))

    section("5. a chunk of block_size + 1 characters holds block_size examples")
    block_size = 8
    x = train_data[:block_size]
    y = train_data[1:block_size+1]
    print(f"train_data[:block_size+1] = {train_data[:block_size+1].tolist()}")
    for t in range(block_size):
        context = x[:t+1]
        target = y[t]
        print(f"  when input is {context.tolist()} the target: {target}")
    check("it begins 18, 47, 56, 57 as in the lecture", train_data[:4].tolist() == [18, 47, 56, 57])
    print("  contexts of every length from 1 to block_size: the model learns to predict from as\n"
          "  little as one character, which is how sampling starts")

    section("6. a batch: 4 independent chunks, so 4 x 8 = 32 examples in one tensor")
    torch.manual_seed(1337)
    batch_size = 4
    ix = torch.randint(len(train_data) - block_size, (batch_size,))
    xb = torch.stack([train_data[i:i+block_size] for i in ix]) # (4,8)
    yb = torch.stack([train_data[i+1:i+block_size+1] for i in ix]) # (4,8)
    print(f"inputs xb {tuple(xb.shape)}:\n{xb}\ntargets yb {tuple(yb.shape)}:\n{yb}")
    check("every target is the input shifted by one", torch.equal(yb[:, :-1], xb[:, 1:]))
    gpt.batch_size, gpt.block_size, gpt.device = batch_size, block_size, 'cpu'
    torch.manual_seed(1337)
    check("gpt.get_batch, one gather instead of the loop, draws the same batch",
          all(torch.equal(a, b) for a, b in zip((xb, yb), gpt.get_batch(train_data))))

    section("7. the bigram model: each token reads the next one's logits off a table")
    torch.manual_seed(1337) # the notebook seeds again before it builds the model
    m = bigram.BigramLanguageModel(vocab_size)
    logits = m.token_embedding_table(xb) # (B,T,C)
    print(f"logits: {tuple(logits.shape)}, one row of {vocab_size} scores per position")
    try:
        F.cross_entropy(logits, yb)
        raised = ''
    except (RuntimeError, ValueError) as e:
        raised = str(e).splitlines()[0]
    print(f"F.cross_entropy(logits (B,T,C), yb (B,T)) fails: {raised}")
    check("cross_entropy refuses (B,T,C): it wants the channels second", bool(raised))
    logits, loss = m(xb, yb) # the model views them as (B*T,C) and (B*T)
    print(f"as (B*T,C) = {tuple(logits.shape)}: loss {loss.item():.4f}; a uniform guess would give "
          f"-ln(1/65) = {math.log(65):.4f}")
    check("above ln 65: the random table is not uniform, so it guesses wrong with confidence",
          loss.item() > math.log(65))
    check("4.87, the video's number", f"{loss.item():.4f}".startswith('4.87'))
    s = m.token_embedding_table.weight.std().item() # nn.Embedding's init: normal(0, 1)
    guess = math.log(65) + s**2 / 2
    # every position of val at once: no random draw, so the batches below stay the notebook's
    with torch.no_grad():
        whole = F.cross_entropy(m.token_embedding_table(val_data[:-1]), val_data[1:]).item()
    print(f"  why: random logits of standard deviation s cost about ln 65 + s^2/2 = {guess:.4f}\n"
          f"  (here s = {s:.4f}); the loss at init over every position of val: {whole:.4f}")
    check("ln 65 + s^2/2 is within 0.1 of the loss over all of val", abs(guess - whole) < 0.1)

    section("8. generate from the untrained model: noise")
    idx = torch.zeros((1, 1), dtype=torch.long) # token 0: a newline, the start
    print(decode(m.generate(idx, max_new_tokens=100)[0].tolist()))

    section("9. train it: AdamW, lr 1e-3, batches of 32, 10,000 steps")
    optimizer = torch.optim.AdamW(m.parameters(), lr=1e-3)
    gpt.batch_size = 32
    for step in range(10000):
        xb, yb = gpt.get_batch(train_data)
        logits, loss = m(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 2000 == 0 or step == 9999:
            print(f"  step {step}: loss {loss.item():.4f} (one batch: noisy)")
    with torch.no_grad():
        mean = torch.stack([m(*gpt.get_batch(val_data))[1] for _ in range(200)]).mean().item()
    print(f"val loss over 200 batches: {mean:.4f}")
    check("about 2.5, as in the lecture (2.4 to 2.6)", 2.4 < mean < 2.6)
    print(decode(m.generate(idx, max_new_tokens=300)[0].tolist()))
    print("  better, but a bigram sees one character: the tokens must start talking to each other")


if __name__ == '__main__':
    run_checked(main, __doc__)
