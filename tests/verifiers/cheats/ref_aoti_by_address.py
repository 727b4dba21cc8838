"""Cheat: half of softmax by torch's own kernels, found by address from native code.

The C++ walks the dynamic linker's list of loaded libraries (_r_debug, a data symbol of
ld.so, not a function the symbol check refuses) to libtorch_cpu's GNU hash table and looks up
two AOTInductor shim functions whose names it assembles at run time, so neither the text scan
nor the binary's imports show them. aoti_torch_cpu_add_Tensor (x - rowmax) and
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
#include <link.h>
#include <cmath>
#include <cstdint>
#include <cstring>

typedef int32_t (*Binary)(void*, void*, void**);
typedef int32_t (*BinaryAlpha)(void*, void*, double, void**);

static uint32_t gnu_hash(const char* s) {
    uint32_t h = 5381;
    for (; *s; ++s) h = h * 33 + (unsigned char)*s;
    return h;
}

static void* lookup(const char* name) {
    for (struct link_map* m = _r_debug.r_map; m; m = m->l_next) {
        if (!m->l_name || !strstr(m->l_name, "libtorch_cpu")) continue;
        const ElfW(Sym)* symtab = nullptr;
        const char* strtab = nullptr;
        const uint32_t* gh = nullptr;
        for (const ElfW(Dyn)* d = m->l_ld; d->d_tag != DT_NULL; ++d) {
            ElfW(Addr) p = d->d_un.d_ptr;
            if (p < m->l_addr) p += m->l_addr;
            if (d->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym)*)p;
            if (d->d_tag == DT_STRTAB) strtab = (const char*)p;
            if (d->d_tag == DT_GNU_HASH) gh = (const uint32_t*)p;
        }
        if (!symtab || !strtab || !gh) return nullptr;
        const uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
        const ElfW(Addr)* bloom = (const ElfW(Addr)*)(gh + 4);
        const uint32_t* buckets = (const uint32_t*)(bloom + bloom_size);
        const uint32_t* chain = buckets + nbuckets;
        const uint32_t h = gnu_hash(name);
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset) return nullptr;
        for (;; ++i) {
            const uint32_t c = chain[i - symoffset];
            if ((c | 1) == (h | 1) && std::strcmp(name, strtab + symtab[i].st_name) == 0)
                return (void*)(m->l_addr + symtab[i].st_value);
            if (c & 1) return nullptr;
        }
    }
    return nullptr;
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
