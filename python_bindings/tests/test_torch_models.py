"""cleave.compile_torch on current transformers models: tiny GPT-2 (tied
and untied), Llama, BERT and Qwen2 train like PyTorch over 20 AdamW steps,
and the trained state dict loads back into the module with
``load_state_dict`` and gives Cleave's logits. These need torch and
transformers, which the project's set-up does not install (they are not in
what CI may install); they run wherever both import."""

import numpy as np
import pytest

import cleave

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB, BATCH, SEQ, STEPS = 96, 2, 8, 20
ADAMW = dict(optimizer="adamw", lr=1e-3, beta1=0.9, beta2=0.999, adam_eps=1e-8,
             weight_decay=0.1)
# Relative loss difference over the steps, and relative logits difference.
LOSS_TOL, LOGITS_TOL = 1e-5, 1e-5


def gpt2(tied):
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16,
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=tied, use_cache=False,
        attn_implementation="eager", resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0))


def llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
        max_position_embeddings=16, bos_token_id=0, eos_token_id=0,
        pad_token_id=None, tie_word_embeddings=False, attention_dropout=0.0,
        use_cache=False, attn_implementation="eager"))


def qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
        max_position_embeddings=16, bos_token_id=0, eos_token_id=0,
        tie_word_embeddings=True, attention_dropout=0.0, use_cache=False,
        attn_implementation="eager"))


def bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=32,
        type_vocab_size=2, pad_token_id=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager"))


class Logits(torch.nn.Module):
    """The model's logits for input_ids, the output Cleave's loss reads."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


MODELS = {"gpt2_tied": lambda: gpt2(True), "gpt2_untied": lambda: gpt2(False),
          "llama": llama, "qwen2": qwen2, "bert": bert}


def batch(name, gen):
    ids = torch.randint(4, VOCAB, (BATCH, SEQ), generator=gen)
    if name != "bert":
        return ids, torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    labels = torch.full_like(ids, -100)  # Masked LM: 3 labelled positions a row.
    for row in range(BATCH):
        pos = torch.randperm(SEQ, generator=gen)[:3]
        labels[row, pos] = ids[row, pos]
        ids[row, pos] = 3
    return ids, labels


def torch_losses(module, ids, labels):
    opt = torch.optim.AdamW(module.parameters(), lr=ADAMW["lr"],
                            betas=(ADAMW["beta1"], ADAMW["beta2"]),
                            eps=ADAMW["adam_eps"], weight_decay=ADAMW["weight_decay"])
    module.train()
    losses = []
    for _ in range(STEPS):
        logits = module(ids)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return np.array(losses)


def relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) /
                 np.max(np.abs(np.asarray(b))))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_trains_like_pytorch_and_loads_back(name, tmp_path):
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(7)
    module = Logits(MODELS[name]())
    ids, labels = batch(name, gen)
    plan = cleave.compile_torch(module, (ids,), input_names=["input_ids"],
                                output_names=["logits"], train=True,
                                loss="cross_entropy:logits,labels", **ADAMW)

    reference = module.state_dict()
    torch_copy = Logits(MODELS[name]())
    torch_copy.load_state_dict(reference)
    want = torch_losses(torch_copy, ids, labels)

    with cleave.Trainer(plan, log_every=0) as trainer:
        got = [trainer.step({"input_ids": ids.numpy(),
                             "labels": labels.numpy()})["loss"]
               for _ in range(STEPS)]
        state = trainer.state_dict()
        trainer.export_onnx(tmp_path / "trained.onnx")
    assert relative(got, want) <= LOSS_TOL, (name, got, list(want))

    # Every key of the module, and the trained values where PyTorch trained.
    assert set(state) == set(reference), set(state) ^ set(reference)
    # Trained values under every parameter's key (a tie's keys share one).
    for key, _ in torch_copy.named_parameters(remove_duplicate=False):
        assert not torch.equal(state[key], reference[key]), key
    module.load_state_dict(state)
    module.eval()
    with torch.no_grad():
        torch_logits = module(ids).numpy()
    infer = cleave.compile(str(tmp_path / "trained.onnx"))
    (cleave_logits,) = infer.run({"input_ids": ids.numpy()})
    print(f"{name}: losses within {relative(got, want):.1e}, logits after "
          f"load_state_dict within {relative(cleave_logits, torch_logits):.1e}")
    assert relative(cleave_logits, torch_logits) <= LOGITS_TOL


def test_torchscript_exporter_is_asked_for():
    module = torch.nn.Linear(4, 2)
    with pytest.raises(cleave.OptionError, match="exporter must be"):
        cleave.compile_torch(module, (torch.randn(3, 4),), exporter="onnx")
    with pytest.raises(cleave.OptionError, match="opset 18 or newer"):
        cleave.compile_torch(module, (torch.randn(3, 4),), opset_version=17)
