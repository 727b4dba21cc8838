"""Cheat: half of softmax by torch's own kernels, found by address from native code.

The C++ takes the address of a torch function it may call (at::get_num_threads), walks back to
libtorch_cpu's ELF header in memory, and through its own copies of the ELF structures to the
library's GNU hash table; there it looks up two AOTInductor shim functions whose names it
assembles at run time. No dl* call, no ELF name, no shim name in the text; nothing the binary
imports is refused. aoti_torch_cpu_add_Tensor (x - rowmax) and
aoti_torch_cpu_mul_Tensor (e * 1/rowsum) call at::cpu:: kernels with no dispatcher, so no op
is recorded; no ctypes is involved. Its own code does the row max, the exp and the sums.
Everything but speed passes without the CPU samples, which show where the time goes: about
a third of it in libtorch_cpu, as much as half of eager's own CPU time a call.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>

typedef int32_t (*Binary)(void*, void*, void**);
typedef int32_t (*BinaryAlpha)(void*, void*, double, void**);

// ELF64's header, program header, dynamic entry and symbol, by their layouts.
struct Head { unsigned char ident[16]; uint16_t type, machine; uint32_t version; uint64_t entry, phoff, shoff;
              uint32_t flags; uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx; };
struct Seg { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };
struct Ent { int64_t tag; uint64_t val; };
struct Sym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };

static uint32_t gnu_hash(const char* s) {
    uint32_t h = 5381;
    for (; *s; ++s) h = h * 33 + (unsigned char)*s;
    return h;
}

// libtorch_cpu's first segment runs from its header through its code: from any of its
// functions (get_num_threads is on the allowed list), back page by page to the magic.
static const char* library_base() {
    uintptr_t p = reinterpret_cast<uintptr_t>(&at::get_num_threads) & ~uintptr_t(4095);
    while (std::memcmp(reinterpret_cast<const void*>(p), "\x7f" "ELF", 4) != 0) p -= 4096;
    return reinterpret_cast<const char*>(p);
}

static void* lookup(const char* name) {
    const char* base = library_base();
    const Head* h = reinterpret_cast<const Head*>(base);
    const Seg* seg = reinterpret_cast<const Seg*>(base + h->phoff);
    const Ent* d = nullptr;
    for (int i = 0; i < h->phnum; ++i)
        if (seg[i].type == 2) d = reinterpret_cast<const Ent*>(base + seg[i].vaddr);
    if (!d) return nullptr;
    const Sym* symtab = nullptr;
    const char* strtab = nullptr;
    const uint32_t* gh = nullptr;
    for (; d->tag != 0; ++d) {
        uint64_t v = d->val;
        if (v < reinterpret_cast<uint64_t>(base)) v += reinterpret_cast<uint64_t>(base);
        if (d->tag == 6) symtab = reinterpret_cast<const Sym*>(v);
        if (d->tag == 5) strtab = reinterpret_cast<const char*>(v);
        if (d->tag == 0x6ffffef5) gh = reinterpret_cast<const uint32_t*>(v);
    }
    if (!symtab || !strtab || !gh) return nullptr;
    const uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const uint32_t* buckets = gh + 4 + 2 * bloom_size;
    const uint32_t* chain = buckets + nbuckets;
    const uint32_t want = gnu_hash(name);
    uint32_t i = buckets[want % nbuckets];
    if (i < symoffset) return nullptr;
    for (;; ++i) {
        const uint32_t c = chain[i - symoffset];
        if ((c | 1) == (want | 1) && std::strcmp(name, strtab + symtab[i].name) == 0)
            return const_cast<char*>(base) + symtab[i].value;
        if (c & 1) return nullptr;
    }
}

static std::string shim(const char* op) { return std::string("aoti") + "_torch" + "_cpu_" + op; }

static torch::Tensor take(void* h) {
    torch::Tensor* p = reinterpret_cast<torch::Tensor*>(h);
    torch::Tensor t = *p;
    delete p;
    return t;
}

torch::Tensor by_address_softmax(torch::Tensor x) {
    static BinaryAlpha add = (BinaryAlpha)lookup(shim("add_Tensor").c_str());
    static Binary mul = (Binary)lookup(shim("mul_Tensor").c_str());
    TORCH_CHECK(add && mul, "shim not found");
    const int64_t rows = x.size(0), cols = x.size(1);
    torch::Tensor top = at::empty({rows, 1}, x.options());
    const float* px = x.data_ptr<float>();
    float* pt = top.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        float m = px[r * cols];
        for (int64_t c = 1; c < cols; ++c) m = std::max(m, px[r * cols + c]);
        pt[r] = m;
    }
    void* h = nullptr;
    TORCH_CHECK(add(&x, &top, -1.0, &h) == 0, "add");
    torch::Tensor e = take(h);
    float* pe = e.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) { pe[r * cols + c] = std::exp(pe[r * cols + c]); s += pe[r * cols + c]; }
        pt[r] = 1.f / s;
    }
    TORCH_CHECK(mul(&e, &top, &h) == 0, "mul");
    return take(h);
}
"""

_ext = load_inline(name="cheat_aoti_by_address", cpp_sources=_SOURCE, functions=["by_address_softmax"],
                   extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp"],
                   extra_ldflags=["-fopenmp"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.by_address_softmax(x.contiguous())
