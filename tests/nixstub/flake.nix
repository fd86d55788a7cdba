# Test double for nixpkgs: the real nixpkgs `lib` (unpacked into nixpkgs-lib/ by the test
# fixture) and a stub package set with just the attributes ReproBridge's generated flake.nix
# uses. Tests swap it in with `--override-input nixpkgs path:<store path of a prepared copy>`;
# see README.md. The package set says nothing about real nixpkgs.
{
  description = "ReproBridge test stub for nixpkgs (tests only)";

  outputs =
    { self }:
    {
      lib = import ./nixpkgs-lib/lib;
      # `nix develop` looks up bashInteractive in the (overridden) nixpkgs input.
      legacyPackages = self.lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (
        system: import ./default.nix { inherit system; }
      );
    };
}
