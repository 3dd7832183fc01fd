//! rlgrad-derive: `#[derive(Module)]` for `rlgrad-autodiff`, re-exported there as
//! `rlgrad_autodiff::nn::Module` (and `rlgrad_autodiff::Module`) beside the trait, so a
//! user depends on `rlgrad-autodiff` alone.
//!
//! For a struct whose fields are modules (layers, `Param`s, and `Vec`s, `Option`s and
//! `Box`es of modules), the derive writes `Module::visit` and `visit_mut` (the fields in
//! declaration order) and `visit_named`/`visit_named_mut` (each field under its name:
//! `l1/weight`; tuple fields under their index). Every other method of the trait
//! (`parameters`, `named_parameters`, `name_by_path`, `soft_update_from`, ...) follows.
//! `#[module(skip)]` leaves out a field that is not a module (a step counter, a config).
//!
//! ```
//! use rlgrad_autodiff::nn::{Init, Linear, Module};
//! use rlgrad_core::Rng;
//!
//! #[derive(Module, Clone)]
//! struct Actor {
//!     layers: Vec<Linear>,
//!     #[module(skip)]
//!     max_action: f32,
//! }
//!
//! let mut rng = Rng::new(0, "init");
//! let actor = Actor {
//!     layers: vec![Linear::new("l1", 3, 8, Init::TorchDefault, &mut rng)?,
//!                  Linear::new("l2", 8, 1, Init::TorchDefault, &mut rng)?],
//!     max_action: 2.0,
//! };
//! assert_eq!(actor.named_parameters()[2].0, "layers/1/weight");
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! The impl is generic over the float type and device (`impl<T, D> Module<T, D>`) with a
//! bound `FieldType: Module<T, D>` per field, so a struct of `Linear<f64>`s is a
//! `Module<f64>` and a generic `struct Actor<T: Float, D: Device>` works too. The price
//! of that genericity (serde's too): a field that is not a module makes the struct no
//! module, reported where the struct is used as one (`trait bound `u64: Module<_, _>` was
//! not satisfied`), not at the field. Shapes the derive does not support are errors at
//! the derive:
//!
//! ```compile_fail
//! use rlgrad_autodiff::nn::Module;
//! #[derive(Module)]
//! enum Policy { Gaussian, Categorical } // error: `#[derive(Module)]` supports structs only
//! ```
//!
//! ```compile_fail,E0599
//! use rlgrad_autodiff::nn::{Linear, Module};
//! #[derive(Module)]
//! struct Actor {
//!     l1: Linear,
//!     steps: u64, // needs `#[module(skip)]`
//! }
//! fn count(actor: &Actor) -> usize {
//!     actor.num_parameters() // error: trait bound `u64: Module<_, _>` was not satisfied
//! }
//! ```
//!
//! ```compile_fail
//! use rlgrad_autodiff::nn::{Linear, Module};
//! #[derive(Module)]
//! struct Actor {
//!     #[module(skipp)] // error: unknown `module` attribute `skipp`; expected `skip`
//!     l1: Linear,
//! }
//! ```

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, GenericParam, Ident, Index, parse_macro_input, parse_quote};

/// Derives `rlgrad_autodiff::nn::Module` for a struct of modules; see the crate docs.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match module_impl(&input) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// One field that is a module: how to reach it and its path segment.
struct Field {
    access: TokenStream2,
    segment: String,
    ty: syn::Type,
    span: Span,
}

fn module_impl(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(data) => {
            return Err(syn::Error::new(
                data.enum_token.span(),
                "`#[derive(Module)]` supports structs only: an enum's parameters depend on its \
                 variant, and a module's parameters come in one fixed order; implement `Module` by \
                 hand or make the variants fields of a struct (`Option<T>` fields are supported)",
            ));
        }
        Data::Union(data) => {
            return Err(syn::Error::new(
                data.union_token.span(),
                "`#[derive(Module)]` supports structs only, not unions",
            ));
        }
    };
    let mut modules = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        if skipped(&field.attrs)? {
            continue;
        }
        let (access, segment) = match &field.ident {
            Some(ident) => (quote!(#ident), ident.to_string()),
            None => {
                let index = Index::from(i);
                (quote!(#index), i.to_string())
            }
        };
        modules.push(Field {
            access,
            segment,
            ty: field.ty.clone(),
            span: field.ty.span(),
        });
    }

    let krate = quote!(::rlgrad_autodiff);
    let (float, device) = (format_ident!("__RlgradT"), format_ident!("__RlgradD"));
    let mut generics = input.generics.clone();
    generics
        .params
        .push(GenericParam::Type(parse_quote!(#float: #krate::Float)));
    generics
        .params
        .push(GenericParam::Type(parse_quote!(#device: #krate::Device)));
    let where_clause = generics.make_where_clause();
    for field in &modules {
        // `FieldType: Module<T, D>`, spanned at the field so that an error points at it.
        let ty = &field.ty;
        let bound = quote_spanned!(field.span=> #ty: #krate::nn::Module<#float, #device>);
        where_clause.predicates.push(syn::parse2(bound)?);
    }
    let (impl_generics, _, where_clause) = generics.split_for_impl();
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let name = &input.ident;
    let param = quote!(#krate::Param<#float, #device>);
    let module = quote!(#krate::nn::Module<#float, #device>);

    let visit = modules.iter().map(|f| {
        let (access, ty) = (&f.access, &f.ty);
        quote_spanned!(f.span=> <#ty as #module>::visit(&self.#access, f);)
    });
    let visit_mut = modules.iter().map(|f| {
        let (access, ty) = (&f.access, &f.ty);
        quote_spanned!(f.span=> <#ty as #module>::visit_mut(&mut self.#access, f);)
    });
    let visit_named = modules.iter().map(|f| {
        let (access, ty, segment) = (&f.access, &f.ty, &f.segment);
        quote_spanned!(f.span=> <#ty as #module>::visit_named(
            &self.#access, &#krate::nn::child_path(prefix, #segment), f);)
    });
    let visit_named_mut = modules.iter().map(|f| {
        let (access, ty, segment) = (&f.access, &f.ty, &f.segment);
        quote_spanned!(f.span=> <#ty as #module>::visit_named_mut(
            &mut self.#access, &#krate::nn::child_path(prefix, #segment), f);)
    });
    // Unused arguments when there is no module field.
    let quiet = quote!(let _ = (&f, &prefix););
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #module for #name #ty_generics #where_clause {
            fn visit<'__a>(&'__a self, f: &mut dyn FnMut(&'__a #param)) {
                let _ = &f;
                #(#visit)*
            }
            fn visit_mut<'__a>(&'__a mut self, f: &mut dyn FnMut(&'__a mut #param)) {
                let _ = &f;
                #(#visit_mut)*
            }
            fn visit_named<'__a>(&'__a self, prefix: &str, f: &mut dyn FnMut(&str, &'__a #param)) {
                #quiet
                #(#visit_named)*
            }
            fn visit_named_mut<'__a>(
                &'__a mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &'__a mut #param),
            ) {
                #quiet
                #(#visit_named_mut)*
            }
        }
    })
}

/// Whether the field has `#[module(skip)]`; an error for any other `module` attribute.
fn skipped(attrs: &[syn::Attribute]) -> syn::Result<bool> {
    let mut skip = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else {
                let found = meta
                    .path
                    .get_ident()
                    .map_or_else(|| "a path".to_owned(), Ident::to_string);
                Err(meta.error(format_args!(
                    "unknown `module` attribute `{found}`; expected `skip` \
                     (`#[module(skip)]` leaves out a field that is not a module)"
                )))
            }
        })?;
    }
    Ok(skip)
}

/// The README's example, compiled and run as a doctest so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctests {}
