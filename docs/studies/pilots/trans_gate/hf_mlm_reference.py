"""The CPU check of the trans-gate pilots: an HF run_mlm-style MLM loop (BertForMaskedLM,
DataCollatorForLanguageModeling, blocks of 128) on the derived English text, to compare its
loss curve with crossalign's. Usage: python hf_mlm_reference.py STEPS LENGTH BATCH LAYERS HIDDEN [TRAIN_FILE]"""
import sys, time, math, torch, numpy as np
from transformers import PreTrainedTokenizerFast, BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling
D = "runs/pilots/derived-trans"  # run from the repository root
steps = int(sys.argv[1]); L = int(sys.argv[2]); B = int(sys.argv[3]); layers=int(sys.argv[4]); hid=int(sys.argv[5])
tok = PreTrainedTokenizerFast.from_pretrained(D + "/tokenizer")
print("special", tok.cls_token, tok.sep_token, tok.mask_token, tok.pad_token, len(tok))
def blocks(path):
    ids = []
    for line in open(path):
        ids.extend(tok(line.strip(), add_special_tokens=False)["input_ids"] + [tok.sep_token_id])
    n = len(ids) // (L - 1)
    arr = np.array(ids[: n * (L - 1)]).reshape(n, L - 1)
    return torch.tensor(np.concatenate([np.full((n, 1), tok.cls_token_id), arr], 1))
tr = blocks(sys.argv[6] if len(sys.argv) > 6 else D + "/en-en-XD/train.en"); va = blocks(D + "/en-en-XD/valid.en")
print("train blocks", tr.shape, "valid", va.shape)
torch.manual_seed(0)
cfg = BertConfig(vocab_size=len(tok), hidden_size=hid, num_hidden_layers=layers, num_attention_heads=hid//32, intermediate_size=4*hid, max_position_embeddings=512, pad_token_id=tok.pad_token_id)
model = BertForMaskedLM(cfg)
coll = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s+1)/(steps/20), max(0.0, (steps - s) / (steps - steps/20))))
g = torch.Generator().manual_seed(0)
def valid():
    model.eval(); torch.manual_seed(1); tot=0; n=0
    with torch.no_grad():
        for i in range(0, len(va), 64):
            b = coll([{"input_ids": x} for x in va[i:i+64]])
            out = model(**b); k = (b["labels"] != -100).sum().item(); tot += out.loss.item()*k; n += k
    model.train(); return tot/n
t=time.time()
for s in range(steps):
    idx = torch.randint(len(tr), (B,), generator=g)
    b = coll([{"input_ids": x} for x in tr[idx]])
    loss = model(**b).loss
    loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step(); opt.zero_grad()
    if (s+1) % 100 == 0: print(s+1, round(loss.item(),3), "valid", round(valid(),3), f"{time.time()-t:.0f}s", flush=True)
